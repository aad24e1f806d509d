package pgstore

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
)

// collectLock is the advisory lock that orders Collect's removal of unused
// artifact bytes against commits that refer to bytes: commits hold it
// shared, a collection pass exclusive (and only when it is free).
const collectLock = 7310552

// DefaultLeaseGrace is how long after its expiry a lease row is kept
// before Collect removes it. A live host renews its leases every few
// seconds, so only a dead host's leases stay expired that long.
const DefaultLeaseGrace = time.Hour

// DefaultCollectEvery is the period of the collection pass a Store runs
// in the background (Options.CollectEvery).
const DefaultCollectEvery = 10 * time.Minute

// DefaultCollectLimit bounds the work of one background pass: at most this
// many lease rows, and the chunks of at most this many artifacts' bytes.
const DefaultCollectLimit = 1000

// CollectOptions bound one collection pass.
type CollectOptions struct {
	// LeaseGrace: a lease is removed once it has been expired this long
	// (0: DefaultLeaseGrace).
	LeaseGrace time.Duration
	// Limit bounds the pass (0: DefaultCollectLimit): lease rows removed,
	// and distinct artifact hashes examined.
	Limit int
}

// Collected is what a pass removed.
type Collected struct {
	Leases int // expired lease rows
	Blobs  int // artifacts whose bytes no session refers to
	// BlobsBusy is set when the pass left the bytes alone because commits
	// that refer to bytes were in flight; a later pass does them.
	BlobsBusy bool
}

// collector is the state of a Store's collection: where the next pass
// resumes its walk of the blobs, and its background goroutine.
type collector struct {
	mu     sync.Mutex
	cursor string // the last hash the previous pass examined; "" from the start
	stop   context.CancelFunc
	done   chan struct{}
}

// Collect runs one bounded collection pass, safe with any number of hosts
// committing and collecting on the database at once:
//
//   - lease rows expired for longer than LeaseGrace are removed (rows being
//     renewed or taken over right now are skipped). A holder that comes back
//     later is refused with not_owner, as after a takeover, and a new lease
//     on the key gets a token higher than any it had (lease_tokens).
//   - artifact bytes that no session refers to (blob_refs: every commit that
//     names an artifact adds its session's reference, Delete removes the
//     session's) are removed, walking the blobs by hash, Limit hashes per
//     pass. The pass holds the collection lock exclusively, taken only if
//     free, and decides in a statement that starts once it holds it: a
//     commit that refers to bytes holds the lock shared until it ends, so
//     each such commit has either committed its references before the
//     decision (and they are seen) or waits for the pass to end and then
//     writes its chunks again.
func (s *Store) Collect(ctx context.Context, o CollectOptions) (Collected, error) {
	if o.LeaseGrace <= 0 {
		o.LeaseGrace = DefaultLeaseGrace
	}
	if o.Limit <= 0 {
		o.Limit = DefaultCollectLimit
	}
	var out Collected
	ct, err := s.pool.Exec(ctx, `DELETE FROM leases WHERE key IN (
		SELECT key FROM leases WHERE expires_at < now() - make_interval(secs => $1)
		ORDER BY expires_at LIMIT $2 FOR UPDATE SKIP LOCKED)`, seconds(o.LeaseGrace), o.Limit)
	if err != nil {
		return out, mapErr(err, "pgstore.Collect: leases")
	}
	out.Leases = int(ct.RowsAffected())
	s.coll.mu.Lock()
	defer s.coll.mu.Unlock()
	err = s.tx(ctx, "pgstore.Collect: artifact bytes", func(tx pgx.Tx) error {
		var free bool
		if err := tx.QueryRow(ctx, "SELECT pg_try_advisory_xact_lock($1)", collectLock).Scan(&free); err != nil {
			return err
		}
		if !free {
			out.BlobsBusy = true
			return nil
		}
		rows, err := tx.Query(ctx, "SELECT DISTINCT sha256 FROM blobs WHERE sha256 > $1 ORDER BY sha256 LIMIT $2", s.coll.cursor, o.Limit)
		if err != nil {
			return err
		}
		shas, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return err
		}
		if len(shas) == 0 {
			s.coll.cursor = ""
			return nil
		}
		err = tx.QueryRow(ctx, `WITH d AS (DELETE FROM blobs b WHERE b.sha256 = ANY($1)
			AND NOT EXISTS (SELECT 1 FROM blob_refs r WHERE r.sha256 = b.sha256) RETURNING sha256)
			SELECT count(DISTINCT sha256) FROM d`, shas).Scan(&out.Blobs)
		if err != nil {
			return err
		}
		s.coll.cursor = shas[len(shas)-1]
		if len(shas) < o.Limit {
			s.coll.cursor = "" // the walk reached the end: start again
		}
		return nil
	})
	return out, err
}

// startCollector runs a pass now and then every period, until closeCollector.
func (s *Store) startCollector(period time.Duration) {
	ctx, cancel := context.WithCancel(context.Background())
	s.coll.stop, s.coll.done = cancel, make(chan struct{})
	go func() {
		defer close(s.coll.done)
		for {
			pctx, pcancel := context.WithTimeout(ctx, time.Minute)
			_, err := s.Collect(pctx, CollectOptions{})
			pcancel()
			_ = err // unavailable or busy: the next pass tries again
			if errors.Is(ctx.Err(), context.Canceled) {
				return
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(period):
			}
		}
	}()
}

func (s *Store) closeCollector() {
	if s.coll.stop != nil {
		s.coll.stop()
		<-s.coll.done
	}
}
