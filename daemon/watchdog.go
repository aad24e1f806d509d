package daemon

import (
	"sync/atomic"
	"time"
)

// watch calls expire when an operation (a write; a request run without
// passing reading on) has run for longer than timeout. Operations do not
// overlap. It keeps one timer, armed by the first operation after an idle
// spell and re-armed from the timer's own goroutine while operations go
// on; an operation itself only stores its start time. A timer per
// operation (context.WithTimeout, time.AfterFunc) would, every time, wake
// the thread blocked in the runtime's network poller to recompute its
// sleep, and on a small machine that wake-up competes with the answer for
// the CPU.
type watch struct {
	timeout time.Duration
	expire  func()
	t       *time.Timer
	start   atomic.Int64 // when the operation in progress began, in ns since base; 0 if none
	armed   atomic.Bool  // t is running, or its function is
	base    time.Time
}

func newWatch(timeout time.Duration, expire func()) *watch {
	w := &watch{timeout: timeout, expire: expire, base: time.Now()}
	w.t = time.AfterFunc(time.Hour, w.check)
	w.t.Stop()
	return w
}

// now is the monotonic time since base, never 0.
func (w *watch) now() int64 { return int64(time.Since(w.base)) + 1 }

// begin marks the start of an operation; end must follow.
func (w *watch) begin() {
	w.start.Store(w.now())
	if w.armed.CompareAndSwap(false, true) {
		w.t.Reset(w.timeout)
	}
}

func (w *watch) end() { w.start.Store(0) }

// stop disarms the watch for good; no operation may begin after it.
func (w *watch) stop() {
	w.armed.Store(true) // no begin re-arms it
	w.t.Stop()
}

// check runs when the timer fires: it expires an operation that has run
// out of time, re-arms the timer for the end of one still within its
// time, and otherwise disarms it.
func (w *watch) check() {
	for {
		if s := w.start.Load(); s != 0 {
			if left := time.Duration(s + int64(w.timeout) - w.now()); left > 0 {
				w.t.Reset(left)
				return
			}
			w.armed.Store(false) // the next operation re-arms it
			w.expire()
			return
		}
		w.armed.Store(false)
		// An operation that began after the load above saw armed still
		// set and left the timer alone: take it back and look again.
		if w.start.Load() == 0 || !w.armed.CompareAndSwap(false, true) {
			return
		}
	}
}
