package engine_test

import (
	"sync"
	"testing"

	"github.com/cairn-dev/cairn/api"
	"github.com/cairn-dev/cairn/internal/testkit"
	"github.com/cairn-dev/cairn/session"
)

func TestEvents(t *testing.T) {
	forEachStore(t, func(t *testing.T, f storeFactory) {
		e := newEngine(t, f)
		ctx := testkit.Context(t)
		var mu sync.Mutex
		var got []string
		cancel := e.Subscribe(func(ev api.Event) {
			mu.Lock()
			defer mu.Unlock()
			got = append(got, ev.Type+" "+mustJSON(t, ev.Data))
		})
		// A panicking subscriber does not break the engine or the others.
		cancelPanic := e.Subscribe(func(api.Event) { panic("subscriber bug") })
		defer cancelPanic()

		saveDelta(t, e, "s", msg("u", 1))
		_, err := e.Save(ctx, api.SaveRequest{SessionID: "s", Change: &session.Change{}, ExpectGeneration: session.Expect(9)})
		wantCode(t, err, session.CodeConflict) // failed: no event
		_, err = e.BeginRun(ctx, api.BeginRunRequest{SessionID: "s", RunID: "r"})
		noErr(t, err)
		_, err = e.Checkpoint(ctx, api.CheckpointRequest{RunID: "r", Turn: 1})
		noErr(t, err)
		_, err = e.ResumeRun(ctx, api.ResumeRunRequest{RunID: "r", NewRunID: "r2"})
		noErr(t, err)
		_, err = e.CompleteRun(ctx, api.CompleteRunRequest{RunID: "r2", Status: session.RunCompleted})
		noErr(t, err)
		noErr(t, e.CompleteStep(ctx, api.CompleteStepRequest{WorkflowID: "w", StepID: "a", Identity: "1"}))
		_, err = e.Fork(ctx, api.ForkRequest{SessionID: "s", NewID: "f"})
		noErr(t, err)
		noErr(t, e.Delete(ctx, "f"))
		cancel()
		cancel() // twice is fine
		saveDelta(t, e, "s", msg("u", 2))

		want := []string{
			`session.committed {"generation":1,"session_id":"s"}`,
			`session.committed {"generation":2,"session_id":"s"}`,
			`session.committed {"generation":3,"session_id":"s"}`,
			`run.checkpointed {"generation":3,"run_id":"r","session_id":"s","turn":1}`,
			`session.committed {"generation":4,"session_id":"s"}`,
			`run.resumed {"generation":4,"resumed_from":"r","run_id":"r2","session_id":"s"}`,
			`session.committed {"generation":5,"session_id":"s"}`,
			`run.completed {"generation":5,"run_id":"r2","session_id":"s","status":"completed"}`,
			`workflow.step_completed {"step_id":"a","workflow_id":"w"}`,
			`session.committed {"generation":1,"session_id":"f"}`,
			`session.deleted {"session_id":"f"}`,
		}
		mu.Lock()
		defer mu.Unlock()
		if mustJSON(t, got) != mustJSON(t, want) {
			t.Fatalf("events:\n%s\nwant\n%s", mustJSON(t, got), mustJSON(t, want))
		}
	})
}
