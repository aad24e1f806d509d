package engine

import (
	"context"
	"encoding/base64"
	"time"

	"github.com/fxamacker/cbor/v2"

	"github.com/cairn-dev/cairn/api"
	"github.com/cairn-dev/cairn/session"
)

// notifier is the store's session.Notifier, or nil: then events are
// published here, right after their commit. With one, every event goes
// through the store and is published when the listener gets it back, on
// every host alike, so a session's events reach each host's subscribers in
// commit order whichever host committed them.
type notifier struct {
	n      session.Notifier
	cancel context.CancelFunc
	done   chan struct{}
}

func (e *Engine) startListening() {
	n, ok := e.store.(session.Notifier)
	if !ok {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	e.notify = &notifier{n: n, cancel: cancel, done: make(chan struct{})}
	ready := make(chan struct{})
	go func() {
		defer close(e.notify.done)
		first := true
		err := n.Listen(ctx, func(p string) {
			if evs, err := decodeEvents(p); err != nil {
				e.log.Warn("an event from the store does not decode; dropped", "error", err)
			} else {
				e.events.publish(evs...)
			}
		}, func() {
			if first {
				first = false
				close(ready)
				return
			}
			e.log.Warn("lost the store's event connection for a while: some events of that time may not have been delivered")
		})
		if err != nil && ctx.Err() == nil {
			e.log.Error("listening for the store's events stopped", "error", err)
		}
	}()
	// A subscriber that subscribes once New returns gets the events of
	// every commit after: wait (briefly) until the listener listens.
	select {
	case <-ready:
	case <-time.After(5 * time.Second):
		e.log.Warn("the store's event listener is not ready yet; early events may be missed")
	}
}

func (e *Engine) stopListening() {
	if e.notify != nil {
		e.notify.cancel()
		<-e.notify.done
	}
}

// notifyWith returns CommitOptions.Notify for a commit whose events are
// events(result), or nil when the store does not carry events.
func (e *Engine) notifyWith(events func(session.CommitResult) []api.Event) func(uint64) string {
	if e.notify == nil || events == nil {
		return nil
	}
	return func(gen uint64) string {
		return e.encodeEvents(events(session.CommitResult{Generation: gen}))
	}
}

// emit publishes a commit's events here, unless the store carried them.
// With no subscriber it does not build them: an agent's turn, committed
// with no one listening, skips their allocation after its fdatasync.
func (e *Engine) emit(res session.CommitResult, events func(session.CommitResult) []api.Event) {
	if events != nil && e.notify == nil && e.events.active() {
		e.events.publish(events(res)...)
	}
}

// publishOut publishes events that are not a session's generation
// (deletes, workflow steps, forks made by the store's Copy): through the
// store when it carries events, else here.
func (e *Engine) publishOut(ctx context.Context, evs ...api.Event) {
	if e.notify == nil {
		e.events.publish(evs...)
		return
	}
	p := e.encodeEvents(evs)
	if p == "" {
		return
	}
	// The operation has succeeded; an event that cannot be sent is
	// logged, not turned into the operation's error.
	if err := e.notify.n.Notify(context.WithoutCancel(ctx), p); err != nil {
		e.log.Warn("sending events through the store failed", "error", err)
	}
}

func (e *Engine) encodeEvents(evs []api.Event) string {
	if len(evs) == 0 {
		return ""
	}
	b, err := cbor.Marshal(evs)
	if err != nil {
		e.log.Error("events do not encode; not sent", "error", err)
		return ""
	}
	return base64.StdEncoding.EncodeToString(b)
}

func decodeEvents(p string) ([]api.Event, error) {
	b, err := base64.StdEncoding.DecodeString(p)
	if err != nil {
		return nil, err
	}
	var evs []api.Event
	if err := cbor.Unmarshal(b, &evs); err != nil {
		return nil, err
	}
	return evs, nil
}
