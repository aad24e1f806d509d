package engine_test

import (
	"testing"

	"github.com/cairn-dev/cairn/api"
	"github.com/cairn-dev/cairn/internal/checked"
	"github.com/cairn-dev/cairn/internal/testkit"
	"github.com/cairn-dev/cairn/session"
)

// TestCheckpointValidatesValues: the engine scans every message and state
// a checkpoint brings, unless the context knows those very bytes as
// validated (internal/checked, which only this module can use); a copy of
// a known value is not known.
func TestCheckpointValidatesValues(t *testing.T) {
	forEachStore(t, func(t *testing.T, f storeFactory) {
		e := newEngine(t, f)
		ctx := testkit.Context(t)
		saveDelta(t, e, "s", msg("user", 0))
		_, err := e.BeginRun(ctx, api.BeginRunRequest{SessionID: "s", RunID: "r"})
		noErr(t, err)
		good := session.Value(`{"role":"user","content":"ok"}`)
		for _, tc := range []struct {
			name string
			req  api.CheckpointRequest
		}{
			{"invalid JSON message", api.CheckpointRequest{RunID: "r", Turn: 1, NewMessages: []session.Value{good, session.Value(`{"a":tru}`)}}},
			{"message not UTF-8", api.CheckpointRequest{RunID: "r", Turn: 1, NewMessages: []session.Value{session.Value("\"\xff\"")}}},
			{"invalid state", api.CheckpointRequest{RunID: "r", Turn: 1, NewMessages: []session.Value{good}, State: session.Value(`{"k":}`)}},
			{"unknown run, bad message", api.CheckpointRequest{RunID: "nobody", Turn: 1, NewMessages: []session.Value{session.Value(`[`)}}},
		} {
			_, err := e.Checkpoint(ctx, tc.req)
			if session.CodeOf(err) != session.CodeInvalidArgument {
				t.Errorf("%s: %v; want invalid_argument", tc.name, err)
			}
			// Known bytes are trusted; their copies are not.
			var copies []session.Value
			for _, m := range tc.req.NewMessages {
				copies = append(copies, append(session.Value(nil), m...))
			}
			kctx := checked.With(ctx, copies...)
			if _, err := e.Checkpoint(kctx, tc.req); session.CodeOf(err) != session.CodeInvalidArgument {
				t.Errorf("%s, copies known: %v; want invalid_argument", tc.name, err)
			}
		}
		if sum, err := e.Summary(ctx, "s"); err != nil || sum.MessageCount != 1 {
			t.Fatalf("after refused checkpoints: %+v, %v", sum, err)
		}
		// A checkpoint whose values the context knows commits as any other.
		m := session.Value(`{"role":"assistant","content":"fine"}`)
		st := session.Value(`{"step":1}`)
		if _, err := e.Checkpoint(checked.With(ctx, m, st), api.CheckpointRequest{RunID: "r", Turn: 1, NewMessages: []session.Value{good, m}, State: st}); err != nil {
			t.Fatal(err)
		}
		if sum, err := e.Summary(ctx, "s"); err != nil || sum.MessageCount != 3 {
			t.Fatalf("after the checkpoint: %+v, %v", sum, err)
		}
	})
}
