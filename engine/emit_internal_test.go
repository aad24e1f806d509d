package engine

import (
	"testing"

	"github.com/cairn-dev/cairn/api"
	"github.com/cairn-dev/cairn/session"
)

// TestEmitBuildsEventsForSubscribers checks that a commit's events are
// built only while someone is subscribed, and then delivered.
func TestEmitBuildsEventsForSubscribers(t *testing.T) {
	var e Engine
	built := 0
	events := func(res session.CommitResult) []api.Event {
		built++
		return []api.Event{committedEvent("s", res.Generation)}
	}
	e.emit(session.CommitResult{Generation: 1}, events)
	if built != 0 {
		t.Fatalf("events built %d times with no subscriber", built)
	}
	var got []api.Event
	cancel := e.Subscribe(func(ev api.Event) { got = append(got, ev) })
	e.emit(session.CommitResult{Generation: 2}, events)
	if built != 1 || len(got) != 1 || got[0].Type != api.EventSessionCommitted {
		t.Fatalf("with a subscriber: built %d times, delivered %+v", built, got)
	}
	cancel()
	e.emit(session.CommitResult{Generation: 3}, events)
	if built != 1 || len(got) != 1 {
		t.Fatalf("after the subscription ended: built %d times, delivered %d", built, len(got))
	}
}
