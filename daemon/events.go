package daemon

import (
	"slices"
	"sync"
	"sync/atomic"

	"github.com/cairn-dev/cairn/api"
)

// fanout delivers the backend's events to the subscribed connections. It is
// called on the engine's commit path (with a session lock held), so it never
// blocks: each connection has a queue of protocol.EventQueueLen events, and
// an event that finds the queue full is dropped and counted; the
// connection's writer then pushes api.EventDropped with the count.
//
// It is subscribed to the backend only while a connection is subscribed
// (follow): with no subscriber the engine makes no events at all, where
// building them for nobody cost every commit a few microseconds.
type fanout struct {
	mu      sync.RWMutex // guards the fields below
	subs    map[*wsConn]map[string]bool
	dropped atomic.Uint64 // total, for status

	// attach subscribes publish to the backend and returns the cancel.
	attach func(func(api.Event)) (cancel func())
	cancel func() // the backend subscription held, or nil
	closed bool   // close was called: attach no more
}

func newFanout(attach func(func(api.Event)) (cancel func())) *fanout {
	return &fanout{subs: map[*wsConn]map[string]bool{}, attach: attach}
}

// follow attaches to the backend when a connection is subscribed and
// detaches when none is, or once closed. f.mu is held.
func (f *fanout) follow() {
	switch {
	case len(f.subs) > 0 && f.cancel == nil && !f.closed:
		f.cancel = f.attach(f.publish)
	case (len(f.subs) == 0 || f.closed) && f.cancel != nil:
		f.cancel()
		f.cancel = nil
	}
}

// close detaches from the backend for good.
func (f *fanout) close() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.closed = true
	f.follow()
}

// publish is the backend's subscriber.
func (f *fanout) publish(ev api.Event) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	for c, want := range f.subs {
		if !want[ev.Type] {
			continue
		}
		select {
		case c.events <- ev:
		default:
			c.dropped.Add(1)
			f.dropped.Add(1)
		}
	}
}

// update adds (or removes) events to (from) c's subscription; none means
// all. It returns the subscription afterwards, sorted.
func (f *fanout) update(c *wsConn, add bool, events []string) []string {
	if len(events) == 0 {
		events = api.SubscribableEvents()
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	want := cloneSet(f.subs[c])
	for _, e := range events {
		if add {
			want[e] = true
		} else {
			delete(want, e)
		}
	}
	if len(want) == 0 {
		delete(f.subs, c)
	} else {
		f.subs[c] = want
	}
	f.follow()
	out := make([]string, 0, len(want))
	for e := range want {
		out = append(out, e)
	}
	slices.Sort(out)
	return out
}

// cloneSet copies a subscription set (publish reads the old one under RLock).
func cloneSet(m map[string]bool) map[string]bool {
	out := make(map[string]bool, len(m)+4)
	for k, v := range m {
		out[k] = v
	}
	return out
}

// remove ends c's subscription.
func (f *fanout) remove(c *wsConn) {
	f.mu.Lock()
	delete(f.subs, c)
	f.follow()
	f.mu.Unlock()
}

// count reports how many connections are subscribed.
func (f *fanout) count() int {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return len(f.subs)
}
