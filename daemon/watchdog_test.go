package daemon

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// expiries records the calls of a watch's expire function.
type expiries struct {
	mu    sync.Mutex
	times []time.Time
	ch    chan struct{}
}

func newExpiries() *expiries { return &expiries{ch: make(chan struct{}, 16)} }

func (e *expiries) expire() {
	e.mu.Lock()
	e.times = append(e.times, time.Now())
	e.mu.Unlock()
	e.ch <- struct{}{}
}

func (e *expiries) count() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.times)
}

// wait waits for the next expiry and returns when it happened.
func (e *expiries) wait(t *testing.T) time.Time {
	t.Helper()
	select {
	case <-e.ch:
	case <-time.After(10 * time.Second):
		t.Fatal("a write past its timeout was not expired")
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.times[len(e.times)-1]
}

func TestWatchExpiresAStuckWrite(t *testing.T) {
	const timeout = 100 * time.Millisecond
	e := newExpiries()
	w := newWatch(timeout, e.expire)
	defer w.stop()
	// Writes that finish, over several timeouts: the timer fires and is
	// re-armed or disarmed, and nothing expires.
	for end := time.Now().Add(4 * timeout); time.Now().Before(end); {
		w.begin()
		time.Sleep(time.Millisecond)
		w.end()
	}
	time.Sleep(2 * timeout) // idle: the timer fires once more and disarms
	if n := e.count(); n != 0 {
		t.Fatalf("%d expiries for writes that all finished", n)
	}
	if w.armed.Load() {
		t.Fatal("the timer is still armed after an idle spell")
	}
	// A write that never finishes expires, and not before its time.
	began := time.Now()
	w.begin()
	if at := e.wait(t); at.Sub(began) < timeout {
		t.Fatalf("expired %v after the write began, before the %v timeout", at.Sub(began), timeout)
	}
}

func TestWatchTimesEachWriteFromItsStart(t *testing.T) {
	const timeout = 40 * time.Millisecond
	e := newExpiries()
	w := newWatch(timeout, e.expire)
	defer w.stop()
	// The first write arms the timer; the second starts later and hangs.
	// When the timer fires for the first write's start, the second is
	// still within its time: it must be re-timed from its own start.
	w.begin()
	w.end()
	time.Sleep(timeout / 2)
	began := time.Now()
	w.begin()
	if at := e.wait(t); at.Sub(began) < timeout {
		t.Fatalf("expired %v after the write began, before the %v timeout", at.Sub(began), timeout)
	}
}

// TestWatchRace has writes begin and end while the timer fires at
// every point between them; run under -race. A last stuck write must still
// be caught: the watch was never left disarmed while a write ran.
func TestWatchRace(t *testing.T) {
	const timeout = time.Millisecond
	e := newExpiries()
	var last atomic.Bool // short writes may expire here too; only the last counts
	w := newWatch(timeout, func() {
		if last.Load() {
			e.expire()
		}
	})
	defer w.stop()
	for i := 0; i < 300; i++ {
		w.begin()
		w.end()
		time.Sleep(time.Duration(i%5) * 300 * time.Microsecond)
	}
	last.Store(true)
	w.begin()
	e.wait(t)
}

func TestWatchStop(t *testing.T) {
	e := newExpiries()
	w := newWatch(5*time.Millisecond, e.expire)
	w.begin()
	w.stop()
	time.Sleep(30 * time.Millisecond)
	if n := e.count(); n != 0 {
		t.Fatalf("%d expiries after stop", n)
	}
}
