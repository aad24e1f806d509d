package pgstore

import (
	"context"
	"sync"
	"time"
)

// eventSQL writes one event row; a commit's transaction carries it, and
// waker wakes the listeners once it has committed.
const eventSQL = "INSERT INTO events (payload) VALUES ($1)"

// wakeSQL wakes the listeners of Channel. The wake-up needs no durability
// (the events are rows, read by snapshot; a lost wake-up only delays them
// to the next one or to eventWait), so its transaction does not wait for
// its WAL flush.
const wakeSQL = "BEGIN; SET LOCAL synchronous_commit = off; SELECT pg_notify('" + Channel + "', ''); COMMIT"

// wakeLinger is how long the waker waits, once a commit asks for a
// wake-up, before it sends one, so that one wake-up covers the commits of
// that moment. A client that commits turn after turn would otherwise cost
// the database a second transaction per commit, and its host a round trip
// on another goroutine: through the Python binding, embedded, a 200-byte
// save took 576-609 us with a wake-up each and 421-431 us with the linger
// (docs/PERFORMANCE.md). Events reach other hosts that much later.
var wakeLinger = 2 * time.Millisecond

// waker sends the wake-ups of the events that commits wrote, from one
// goroutine, after the commits and outside their transactions, and
// coalesced: one wake-up covers every commit made within wakeLinger of the
// first that asked, and any made while the previous one was on its way.
//
// Sending pg_notify inside each commit, as it once did, serializes the
// commits of the whole database: PostgreSQL takes one database-wide lock
// for a transaction that notifies, from before its commit record until its
// end, so the commits' WAL flushes queue one behind another instead of
// sharing a flush. With 32 clients that cut pgstore's commits to a third
// (see docs/PERFORMANCE.md).
type waker struct {
	once sync.Once
	ch   chan struct{}
	stop context.CancelFunc
	done chan struct{}
}

// wake asks for a wake-up of the listeners, starting the goroutine on first
// use; Close stops it.
func (s *Store) wake() {
	w := &s.waker
	w.once.Do(func() {
		w.ch = make(chan struct{}, 1)
		w.done = make(chan struct{})
		ctx, cancel := context.WithCancel(context.Background())
		w.stop = cancel
		go s.sendWakeups(ctx)
	})
	select {
	case w.ch <- struct{}{}:
	default: // one is pending already, and covers this commit too
	}
}

func (s *Store) sendWakeups(ctx context.Context) {
	w := &s.waker
	defer close(w.done)
	for {
		select {
		case <-w.ch:
		case <-ctx.Done():
			select {
			case <-w.ch: // asked for before Close: sent all the same
			default:
				return
			}
		}
		stopping := linger(ctx, wakeLinger)
		select {
		case <-w.ch: // asked for during the linger: this wake-up covers it
		default:
		}
		// A failure is not retried: the listeners read every committed
		// event at their next wake-up or after eventWait, and reconnect
		// and catch up when the database was away. Close waits for the
		// last one, so that one gets less time.
		timeout := 5 * time.Second
		if stopping {
			timeout = time.Second
		}
		wctx, cancel := context.WithTimeout(context.Background(), timeout)
		if conn, err := s.pool.Acquire(wctx); err == nil {
			conn.Conn().PgConn().Exec(wctx, wakeSQL).Close()
			conn.Release()
		}
		cancel()
		if stopping {
			return
		}
	}
}

// linger waits d, or less if ctx ends first, and reports whether it did.
func linger(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return true
	case <-t.C:
		return false
	}
}

// closeWaker stops the goroutine, once it has sent the wake-up in hand.
func (s *Store) closeWaker() {
	w := &s.waker
	w.once.Do(func() {}) // no goroutine may start after Close
	if w.stop != nil {
		w.stop()
		<-w.done
	}
}
