package pgstore

import (
	"context"
	"errors"
	"time"

	"github.com/cairn-dev/cairn/session"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Channel is the NOTIFY channel that wakes the hosts that share a database
// when events were written. Its payload is only the event's row id: the
// events themselves are rows of the events table, read by each listener,
// so neither NOTIFY's 8000-byte payload limit nor a lost connection drops
// one.
const Channel = "cairn_events"

// EventRetention is how long the events table keeps an event for a
// listener that was disconnected when it was sent. Listeners prune older
// rows; one that was away for more than half of it (when its catch-up may
// find events already pruned) calls Listen's lost.
const EventRetention = 10 * time.Minute

// ListenerName is the application_name of Listen's connection.
const ListenerName = "cairn_events listener"

// eventWait bounds a listener's wait for a notification, so it reads (and
// prunes) now and then even when none comes.
const eventWait = 30 * time.Second

// notifySQL writes one event row and wakes the listeners with its id. In a
// commit's transaction both happen only if it commits.
const notifySQL = `WITH e AS (INSERT INTO events (payload) VALUES ($1) RETURNING id)
	SELECT pg_notify($2, id::text) FROM e`

// readSQL returns the statement's snapshot and the events whose
// transactions committed since snapshot $1 was taken: those visible now
// (the join sees only committed rows) and not visible in $1. Reading by
// transaction visibility, not by id, is what makes each event come back
// exactly once: ids are taken before commit, so a later id can commit
// first, but a transaction is invisible in one snapshot and visible in the
// next exactly once. A session's events are ordered by id already, since
// its commits take the session's row lock before writing them.
const readSQL = `WITH s AS (SELECT pg_current_snapshot() AS snap)
	SELECT s.snap::text, e.id, e.payload FROM s LEFT JOIN events e
		ON e.xid >= pg_snapshot_xmin($1::pg_snapshot) AND NOT pg_visible_in_snapshot(e.xid, $1::pg_snapshot)
	ORDER BY e.id`

var _ session.Notifier = (*Store)(nil)

// Notify sends payload to every listener of the database.
func (s *Store) Notify(ctx context.Context, payload string) error {
	_, err := s.pool.Exec(ctx, notifySQL, payload, Channel)
	return mapErr(err, "pgstore.Notify")
}

// listener is Listen's state, kept across reconnections: the snapshot of
// its last read is where the next read, after a reconnection too, picks up.
type listener struct {
	fn     func(string)
	lost   func()
	snap   string    // pg_snapshot of the last read; "" before the first
	readAt time.Time // when snap was taken
	pruned time.Time
}

// Listen delivers the database's event payloads to fn on a connection of
// its own (outside the pool), each once, every session's in commit order,
// until ctx ends. It starts with the events committed once it listens (lost
// is called then, first). A lost connection is dialled again with backoff,
// and the events committed meanwhile are delivered once it is back; lost
// is called again only when the connection was away long enough that some
// may have been pruned (see EventRetention).
func (s *Store) Listen(ctx context.Context, fn func(string), lost func()) error {
	if lost == nil {
		lost = func() {}
	}
	l := &listener{fn: fn, lost: lost}
	backoff := 50 * time.Millisecond
	for {
		err := s.listenOnce(ctx, l)
		if ctx.Err() != nil {
			return nil
		}
		if err != nil && !unreachable(err) {
			// Not a connection problem: still retry, more slowly, so a
			// daemon's events come back once the cause is fixed.
			backoff = 2 * time.Second
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 2*time.Second)
	}
}

func (s *Store) listenOnce(ctx context.Context, l *listener) error {
	cfg, err := pgx.ParseConfig(s.dsn)
	if err != nil {
		return err
	}
	// Named, so an operator (or a test) can tell it in pg_stat_activity.
	cfg.RuntimeParams["application_name"] = ListenerName
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, "LISTEN "+Channel); err != nil {
		return err
	}
	if l.snap == "" {
		// Listening starts now: what committed before is not delivered.
		if err := conn.QueryRow(ctx, "SELECT pg_current_snapshot()::text").Scan(&l.snap); err != nil {
			return err
		}
		l.readAt = time.Now()
		l.lost()
	} else if time.Since(l.readAt) > EventRetention/2 {
		l.lost()
	}
	done, cancel := context.WithCancel(ctx)
	cancel() // returns only the notifications pgx holds already
	for {
		// Catch up first (after a reconnection: what committed while
		// away), then once per wake-up; one read may cover many.
		if err := l.read(ctx, conn); err != nil {
			return err
		}
		if time.Since(l.pruned) > EventRetention/10 {
			if _, err := conn.Exec(ctx, "DELETE FROM events WHERE at < now() - make_interval(secs => $1)", seconds(EventRetention)); err != nil {
				return err
			}
			l.pruned = time.Now()
		}
		wctx, cancel := context.WithTimeout(ctx, eventWait)
		_, err := conn.WaitForNotification(wctx)
		cancel()
		if err != nil && (ctx.Err() != nil || !(errors.Is(err, context.DeadlineExceeded) || pgconn.Timeout(err))) {
			return err
		}
		// The next read covers the wake-ups already received as well.
		for {
			n, _ := conn.WaitForNotification(done)
			if n == nil {
				break
			}
		}
	}
}

// read delivers the events committed since l.snap, and moves l.snap on
// only once all of them are in hand, so a read that fails delivers nothing
// and the next one delivers them.
func (l *listener) read(ctx context.Context, conn *pgx.Conn) error {
	rows, err := conn.Query(ctx, readSQL, l.snap)
	if err != nil {
		return err
	}
	var snap string
	var payloads []string
	for rows.Next() {
		var id *int64
		var p *string
		if err := rows.Scan(&snap, &id, &p); err != nil {
			rows.Close()
			return err
		}
		if id != nil {
			payloads = append(payloads, *p)
		}
	}
	if err := rows.Err(); err != nil {
		return err
	}
	l.snap, l.readAt = snap, time.Now()
	for _, p := range payloads {
		l.fn(p)
	}
	return nil
}
