package pgstore

import (
	"context"
	"errors"
	"time"

	"github.com/cairn-dev/cairn/session"
	"github.com/jackc/pgx/v5"
)

var _ session.Leaser = (*Store)(nil)

func seconds(d time.Duration) float64 { return d.Seconds() }

// AcquireLease gives holder the lease on key (see session.Leaser). The
// upsert decides in one statement, under the lease row's lock, so two hosts
// taking the same lease at once get one winner. A new holder's token comes
// from the lease_tokens sequence, so it is higher than any token the key
// had, even one whose row Collect removed since.
func (s *Store) AcquireLease(ctx context.Context, key, holder string, ttl time.Duration, takeover bool) (session.Lease, error) {
	op := "pgstore.AcquireLease " + quote(key)
	if ttl <= 0 {
		return session.Lease{}, session.Errorf(session.CodeInvalidArgument, "%s: the lease length must be positive", op)
	}
	l := session.Lease{Key: key}
	err := s.pool.QueryRow(ctx, `INSERT INTO leases AS l (key, holder, token, expires_at)
		VALUES ($1, $2, nextval('lease_tokens'), now() + make_interval(secs => $3))
		ON CONFLICT (key) DO UPDATE SET
			holder = excluded.holder,
			token = CASE WHEN l.holder = excluded.holder THEN l.token ELSE excluded.token END,
			expires_at = excluded.expires_at
		WHERE l.holder = excluded.holder OR l.expires_at <= now() OR $4
		RETURNING holder, token, expires_at`, key, holder, seconds(ttl), takeover).Scan(&l.Holder, &l.Token, &l.Expires)
	if errors.Is(err, pgx.ErrNoRows) {
		cur, cerr := s.LeaseOf(ctx, key)
		if cerr != nil {
			return session.Lease{}, cerr
		}
		return session.Lease{}, session.Errorf(session.CodeConflict,
			"%s: held by host %q until %s (token %d); take it over only when that host is gone",
			op, cur.Holder, cur.Expires.UTC().Format(time.RFC3339), cur.Token)
	}
	if err != nil {
		return session.Lease{}, mapErr(err, "%s", op)
	}
	return l, nil
}

// LeaseOf returns the lease on key.
func (s *Store) LeaseOf(ctx context.Context, key string) (session.Lease, error) {
	l := session.Lease{Key: key}
	err := s.pool.QueryRow(ctx, "SELECT holder, token, expires_at FROM leases WHERE key = $1", key).Scan(&l.Holder, &l.Token, &l.Expires)
	if errors.Is(err, pgx.ErrNoRows) {
		return l, session.Errorf(session.CodeNotFound, "pgstore.LeaseOf %q: no lease", key)
	}
	return l, mapErr(err, "pgstore.LeaseOf %q", key)
}

// RenewLeases extends every lease holder holds.
func (s *Store) RenewLeases(ctx context.Context, holder string, ttl time.Duration) (int, error) {
	ct, err := s.pool.Exec(ctx, "UPDATE leases SET expires_at = now() + make_interval(secs => $2) WHERE holder = $1", holder, seconds(ttl))
	if err != nil {
		return 0, mapErr(err, "pgstore.RenewLeases %q", holder)
	}
	return int(ct.RowsAffected()), nil
}

// ReleaseLease drops holder's lease on key.
func (s *Store) ReleaseLease(ctx context.Context, key, holder string) error {
	_, err := s.pool.Exec(ctx, "DELETE FROM leases WHERE key = $1 AND holder = $2", key, holder)
	return mapErr(err, "pgstore.ReleaseLease %q", key)
}

// ReleaseLeases drops every lease holder holds.
func (s *Store) ReleaseLeases(ctx context.Context, holder string) error {
	_, err := s.pool.Exec(ctx, "DELETE FROM leases WHERE holder = $1", holder)
	return mapErr(err, "pgstore.ReleaseLeases %q", holder)
}

// fence checks, inside tx, that f's holder still holds its key with its
// token, and renews the lease; not_owner otherwise. The UPDATE takes the
// lease row's lock, so a takeover waits for this commit to end, and a
// commit that waits for a takeover re-reads the row and is refused.
func fence(ctx context.Context, tx pgx.Tx, f *session.Fence) error {
	if f == nil {
		return nil
	}
	ct, err := tx.Exec(ctx, fenceSQL, fenceArgs(f)...)
	if err != nil {
		return err
	}
	if ct.RowsAffected() == 1 {
		return nil
	}
	return fenceRefused(ctx, tx, f)
}

// fenceSQL checks and renews a lease: one row when the fence holds.
const fenceSQL = "UPDATE leases SET expires_at = now() + make_interval(secs => $4) WHERE key = $1 AND holder = $2 AND token = $3"

func fenceArgs(f *session.Fence) []any {
	ttl := f.TTL
	if ttl <= 0 {
		ttl = time.Second
	}
	return []any{f.Key, f.Holder, f.Token, seconds(ttl)}
}

// fenceRefused is the not_owner error of a fence that did not hold,
// naming the lease's holder now.
func fenceRefused(ctx context.Context, tx interface {
	QueryRow(context.Context, string, ...any) pgx.Row
}, f *session.Fence) error {
	var holder string
	var token int64
	err := tx.QueryRow(ctx, "SELECT holder, token FROM leases WHERE key = $1", f.Key).Scan(&holder, &token)
	if errors.Is(err, pgx.ErrNoRows) {
		return session.Errorf(session.CodeNotOwner, "%s: host %q holds no lease on it (token %d); nothing was written", f.Key, f.Holder, f.Token)
	}
	if err != nil {
		return err
	}
	return session.Errorf(session.CodeNotOwner, "%s: host %q lost its lease (token %d) to host %q (token %d); nothing was written", f.Key, f.Holder, f.Token, holder, token)
}
