package pgstore

import (
	"context"
	"time"

	"github.com/cairn-dev/cairn/session"
	"github.com/jackc/pgx/v5"
)

// Channel is the NOTIFY channel that carries events between the hosts
// that share a database.
const Channel = "cairn_events"

var _ session.Notifier = (*Store)(nil)

// Notify sends payload to every listener of the database.
func (s *Store) Notify(ctx context.Context, payload string) error {
	_, err := s.pool.Exec(ctx, "SELECT pg_notify($1, $2)", Channel, payload)
	return mapErr(err, "pgstore.Notify")
}

// Listen delivers the database's payloads to fn on a connection of its
// own (outside the pool), in the order their transactions committed, until
// ctx ends. A lost connection is dialled again with backoff; lost is called
// each time it listens again (and first when it starts listening), since
// payloads sent in between were missed.
func (s *Store) Listen(ctx context.Context, fn func(string), lost func()) error {
	backoff := 50 * time.Millisecond
	for {
		err := s.listenOnce(ctx, fn, lost)
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

func (s *Store) listenOnce(ctx context.Context, fn func(string), lost func()) error {
	conn, err := pgx.Connect(ctx, s.dsn)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, "LISTEN "+Channel); err != nil {
		return err
	}
	if lost != nil {
		lost()
	}
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return err
		}
		fn(n.Payload)
	}
}
