package daemon

import (
	"sync/atomic"
	"testing"
	"time"
)

// TestActivityPolicy: the reader polls after an answer only for a client
// that turns around within the window, and never while a request runs.
func TestActivityPolicy(t *testing.T) {
	var busy atomic.Int32
	a := &activity{busy: &busy, window: 50 * time.Millisecond}
	a.answer()
	if a.expect() {
		t.Fatal("polls after the first answer, before any turn-around is known")
	}
	a.request() // right after the answer: a tight loop
	a.answer()
	if !a.expect() {
		t.Fatal("does not poll for a client that turned around at once")
	}
	busy.Store(1)
	if a.expect() {
		t.Fatal("polls while a request runs")
	}
	busy.Store(0)

	slow := &activity{busy: &busy, window: time.Millisecond}
	slow.answer()
	time.Sleep(5 * time.Millisecond) // a client slower than the window
	slow.request()
	slow.answer()
	if slow.expect() {
		t.Fatal("polls for a client that turns around slower than the window")
	}

	var none *activity // polling off
	none.request()
	none.answer()
}
