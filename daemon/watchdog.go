package daemon

import (
	"sync/atomic"
	"time"
)

// writeWatch calls expire when a write has run for longer than timeout.
// It keeps one timer per connection, armed by the first write after an
// idle spell and re-armed from the timer's own goroutine while writes go
// on; a write itself only stores its start time. A timer per write
// (context.WithTimeout) would, on every answer, wake the goroutine blocked
// in the runtime's network poller to recompute its sleep, and on a small
// machine that wake-up competes with the answer for the CPU.
type writeWatch struct {
	timeout time.Duration
	expire  func()
	t       *time.Timer
	start   atomic.Int64 // when the write in progress began, in ns since base; 0 if none
	armed   atomic.Bool  // t is running, or its function is
	base    time.Time
}

func newWriteWatch(timeout time.Duration, expire func()) *writeWatch {
	w := &writeWatch{timeout: timeout, expire: expire, base: time.Now()}
	w.t = time.AfterFunc(time.Hour, w.check)
	w.t.Stop()
	return w
}

// now is the monotonic time since base, never 0.
func (w *writeWatch) now() int64 { return int64(time.Since(w.base)) + 1 }

// begin marks the start of a write; end must follow. Writes do not
// overlap (the connection's write turn serializes them).
func (w *writeWatch) begin() {
	w.start.Store(w.now())
	if w.armed.CompareAndSwap(false, true) {
		w.t.Reset(w.timeout)
	}
}

func (w *writeWatch) end() { w.start.Store(0) }

// stop disarms the watch for good; no write may begin after it.
func (w *writeWatch) stop() {
	w.armed.Store(true) // no begin re-arms it
	w.t.Stop()
}

// check runs when the timer fires: it expires a write that has run out of
// time, re-arms the timer for the end of one still within its time, and
// otherwise disarms it.
func (w *writeWatch) check() {
	for {
		if s := w.start.Load(); s != 0 {
			if left := time.Duration(s + int64(w.timeout) - w.now()); left > 0 {
				w.t.Reset(left)
				return
			}
			w.armed.Store(false) // the next write re-arms it
			w.expire()
			return
		}
		w.armed.Store(false)
		// A write that began after the load above saw armed still set and
		// left the timer alone: take it back and look again.
		if w.start.Load() == 0 || !w.armed.CompareAndSwap(false, true) {
			return
		}
	}
}
