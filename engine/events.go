package engine

import (
	"maps"
	"slices"
	"sync"

	"github.com/hashicorp/go-hclog"

	"github.com/cairn-dev/cairn/api"
)

// eventBus delivers events to subscribers synchronously, in publication
// order. It copies the subscriber list before calling out, so a callback may
// subscribe or cancel without deadlocking.
type eventBus struct {
	mu     sync.Mutex
	next   int
	subs   map[int]func(api.Event)
	closed bool
	log    hclog.Logger
}

// Subscribe registers fn to be called with every event published after a
// durable commit, and returns a function that cancels the subscription
// (safe to call more than once).
//
// fn is called synchronously on the goroutine of the operation that
// committed, while the engine's locks for that operation are held, so each
// session's events arrive in generation order. fn must therefore be fast
// and must not call back into the engine (it could deadlock); a daemon puts
// events on a queue and sends them from its own goroutine. A panicking fn
// is recovered and logged; the operation has already succeeded. Events are
// published only after the commit is durable, and never for a failed call.
// On a store that carries events between hosts (session.Notifier) fn is
// called instead on the engine's listening goroutine with the events of
// every host's commits, each session's in generation order, a moment after
// the operation returned.
func (e *Engine) Subscribe(fn func(api.Event)) (cancel func()) {
	b := &e.events
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed || fn == nil {
		return func() {}
	}
	if b.subs == nil {
		b.subs = map[int]func(api.Event){}
	}
	id := b.next
	b.next++
	b.subs[id] = fn
	return func() {
		b.mu.Lock()
		delete(b.subs, id)
		b.mu.Unlock()
	}
}

func (b *eventBus) publish(events ...api.Event) {
	b.mu.Lock()
	if len(b.subs) == 0 {
		b.mu.Unlock()
		return
	}
	// Deliver in subscription order so tests and logs are deterministic.
	ids := slices.Sorted(maps.Keys(b.subs))
	fns := make([]func(api.Event), len(ids))
	for i, id := range ids {
		fns[i] = b.subs[id]
	}
	b.mu.Unlock()
	for _, ev := range events {
		for _, fn := range fns {
			b.call(fn, ev)
		}
	}
}

// active reports whether anyone is subscribed. A subscription that
// races with a commit may miss its events either way: publish too finds
// the subscribers only when it runs.
func (b *eventBus) active() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.subs) > 0
}

func (b *eventBus) call(fn func(api.Event), ev api.Event) {
	defer func() {
		if r := recover(); r != nil {
			b.log.Error("event subscriber panicked", "event", ev.Type, "panic", r)
		}
	}()
	fn(ev)
}

func (b *eventBus) closeAll() {
	b.mu.Lock()
	b.closed = true
	b.subs = nil
	b.mu.Unlock()
}

func committedEvent(sid string, gen uint64) api.Event {
	return api.NewEvent(api.EventSessionCommitted, api.SessionCommittedData{SessionID: sid, Generation: gen})
}
