package engine_test

import (
	"bytes"
	"context"
	"testing"

	"github.com/cairn-dev/cairn/api"
	"github.com/cairn-dev/cairn/engine"
	"github.com/cairn-dev/cairn/internal/testkit"
	"github.com/cairn-dev/cairn/session"
)

// runFixture: session "s" with one message and run "r" (running, two
// checkpoints: turn 1 and turn 2, 3 messages at the boundary); session "t"
// with completed run "done" and never-checkpointed run "fresh".
func runFixture(t *testing.T, e *engine.Engine) {
	t.Helper()
	ctx := testkit.Context(t)
	saveDelta(t, e, "s", msg("user", 0))
	_, err := e.BeginRun(ctx, api.BeginRunRequest{SessionID: "s", RunID: "r"})
	noErr(t, err)
	_, err = e.Checkpoint(ctx, api.CheckpointRequest{RunID: "r", Turn: 1, NewMessages: []session.Value{msg("a", 1)},
		Usage: session.Usage{InputTokens: 5, OutputTokens: 5, TotalTokens: 10, Cost: 0.5}, ToolCallsCount: 1, State: session.Value(`{"step":  1}`)})
	noErr(t, err)
	_, err = e.Checkpoint(ctx, api.CheckpointRequest{RunID: "r", Turn: 2, NewMessages: []session.Value{msg("a", 2)},
		Usage: session.Usage{InputTokens: 10, OutputTokens: 10, TotalTokens: 20, Cost: 1}, ToolCallsCount: 3, State: session.Value(`{"step":  2}`)})
	noErr(t, err)
	saveDelta(t, e, "t", msg("user", 0))
	_, err = e.BeginRun(ctx, api.BeginRunRequest{SessionID: "t", RunID: "done"})
	noErr(t, err)
	_, err = e.Checkpoint(ctx, api.CheckpointRequest{RunID: "done", Turn: 1, NewMessages: []session.Value{msg("a", 1)}})
	noErr(t, err)
	_, err = e.CompleteRun(ctx, api.CompleteRunRequest{RunID: "done", Status: session.RunCompleted})
	noErr(t, err)
	_, err = e.BeginRun(ctx, api.BeginRunRequest{SessionID: "t", RunID: "fresh"})
	noErr(t, err)
}

func TestRunErrors(t *testing.T) {
	type op func(ctx context.Context, e *engine.Engine) error
	cases := []struct {
		name string
		op   op
		code session.Code
	}{
		{"begin: assigned id", func(ctx context.Context, e *engine.Engine) error {
			r, err := e.BeginRun(ctx, api.BeginRunRequest{SessionID: "s"})
			if err == nil && r.RunID == "" {
				t.Error("no run id assigned")
			}
			return err
		}, ""},
		{"begin: duplicate id in same session", func(ctx context.Context, e *engine.Engine) error {
			_, err := e.BeginRun(ctx, api.BeginRunRequest{SessionID: "s", RunID: "r"})
			return err
		}, session.CodeConflict},
		{"begin: duplicate id in another session", func(ctx context.Context, e *engine.Engine) error {
			_, err := e.BeginRun(ctx, api.BeginRunRequest{SessionID: "t", RunID: "r"})
			return err
		}, session.CodeConflict},
		{"begin: unknown session", func(ctx context.Context, e *engine.Engine) error {
			_, err := e.BeginRun(ctx, api.BeginRunRequest{SessionID: "nope"})
			return err
		}, session.CodeNotFound},
		{"begin: bad run id", func(ctx context.Context, e *engine.Engine) error {
			_, err := e.BeginRun(ctx, api.BeginRunRequest{SessionID: "s", RunID: "a\x00b"})
			return err
		}, session.CodeInvalidArgument},
		{"checkpoint: turn repeats", func(ctx context.Context, e *engine.Engine) error {
			_, err := e.Checkpoint(ctx, api.CheckpointRequest{RunID: "r", Turn: 2})
			return err
		}, session.CodeInvalidArgument},
		{"checkpoint: turn goes back", func(ctx context.Context, e *engine.Engine) error {
			_, err := e.Checkpoint(ctx, api.CheckpointRequest{RunID: "r", Turn: 1})
			return err
		}, session.CodeInvalidArgument},
		{"checkpoint: negative turn", func(ctx context.Context, e *engine.Engine) error {
			_, err := e.Checkpoint(ctx, api.CheckpointRequest{RunID: "r", Turn: -1})
			return err
		}, session.CodeInvalidArgument},
		{"checkpoint: bad message", func(ctx context.Context, e *engine.Engine) error {
			_, err := e.Checkpoint(ctx, api.CheckpointRequest{RunID: "r", Turn: 3, NewMessages: msgs(`{`)})
			return err
		}, session.CodeInvalidArgument},
		{"checkpoint: bad state", func(ctx context.Context, e *engine.Engine) error {
			_, err := e.Checkpoint(ctx, api.CheckpointRequest{RunID: "r", Turn: 3, State: session.Value(`nope`)})
			return err
		}, session.CodeInvalidArgument},
		{"checkpoint: unknown run", func(ctx context.Context, e *engine.Engine) error {
			_, err := e.Checkpoint(ctx, api.CheckpointRequest{RunID: "ghost", Turn: 1})
			return err
		}, session.CodeNotFound},
		{"checkpoint: completed run", func(ctx context.Context, e *engine.Engine) error {
			_, err := e.Checkpoint(ctx, api.CheckpointRequest{RunID: "done", Turn: 5})
			return err
		}, session.CodeConflict},
		{"checkpoint: wrong session", func(ctx context.Context, e *engine.Engine) error {
			_, err := e.Checkpoint(ctx, api.CheckpointRequest{RunID: "r", SessionID: "t", Turn: 3})
			return err
		}, session.CodeNotOwner},
		{"checkpoint: first turn of a fresh run", func(ctx context.Context, e *engine.Engine) error {
			_, err := e.Checkpoint(ctx, api.CheckpointRequest{RunID: "fresh", Turn: 0})
			return err
		}, ""},
		{"complete: bad status", func(ctx context.Context, e *engine.Engine) error {
			_, err := e.CompleteRun(ctx, api.CompleteRunRequest{RunID: "r", Status: session.RunRunning})
			return err
		}, session.CodeInvalidArgument},
		{"complete: unknown run", func(ctx context.Context, e *engine.Engine) error {
			_, err := e.CompleteRun(ctx, api.CompleteRunRequest{RunID: "ghost", Status: session.RunCompleted})
			return err
		}, session.CodeNotFound},
		{"complete: different final status", func(ctx context.Context, e *engine.Engine) error {
			_, err := e.CompleteRun(ctx, api.CompleteRunRequest{RunID: "done", Status: session.RunFailed})
			return err
		}, session.CodeConflict},
		{"complete: same final status again", func(ctx context.Context, e *engine.Engine) error {
			_, err := e.CompleteRun(ctx, api.CompleteRunRequest{RunID: "done", Status: session.RunCompleted})
			return err
		}, ""},
		{"complete: wrong session", func(ctx context.Context, e *engine.Engine) error {
			_, err := e.CompleteRun(ctx, api.CompleteRunRequest{RunID: "r", SessionID: "t", Status: session.RunCompleted})
			return err
		}, session.CodeNotOwner},
		{"resume: unknown run", func(ctx context.Context, e *engine.Engine) error {
			_, err := e.ResumeRun(ctx, api.ResumeRunRequest{RunID: "ghost"})
			return err
		}, session.CodeNoCheckpoint},
		{"resume: unknown run in a named session", func(ctx context.Context, e *engine.Engine) error {
			_, err := e.ResumeRun(ctx, api.ResumeRunRequest{RunID: "ghost", SessionID: "s"})
			return err
		}, session.CodeNoCheckpoint},
		{"resume: completed run", func(ctx context.Context, e *engine.Engine) error {
			_, err := e.ResumeRun(ctx, api.ResumeRunRequest{RunID: "done"})
			return err
		}, session.CodeNoCheckpoint},
		{"resume: never checkpointed", func(ctx context.Context, e *engine.Engine) error {
			_, err := e.ResumeRun(ctx, api.ResumeRunRequest{RunID: "fresh"})
			return err
		}, session.CodeNoCheckpoint},
		{"resume: not the owner", func(ctx context.Context, e *engine.Engine) error {
			_, err := e.ResumeRun(ctx, api.ResumeRunRequest{RunID: "r", SessionID: "t"})
			return err
		}, session.CodeNotOwner},
		{"resume: unknown named session", func(ctx context.Context, e *engine.Engine) error {
			_, err := e.ResumeRun(ctx, api.ResumeRunRequest{RunID: "r", SessionID: "nope"})
			return err
		}, session.CodeNotFound},
		{"resume: new id taken elsewhere", func(ctx context.Context, e *engine.Engine) error {
			_, err := e.ResumeRun(ctx, api.ResumeRunRequest{RunID: "r", NewRunID: "fresh"})
			return err
		}, session.CodeConflict},
		{"resume: new id is an unrelated run of the session", func(ctx context.Context, e *engine.Engine) error {
			if _, err := e.BeginRun(ctx, api.BeginRunRequest{SessionID: "s", RunID: "other"}); err != nil {
				return err
			}
			_, err := e.ResumeRun(ctx, api.ResumeRunRequest{RunID: "r", NewRunID: "other"})
			return err
		}, session.CodeConflict},
		{"resume: new id equals old", func(ctx context.Context, e *engine.Engine) error {
			_, err := e.ResumeRun(ctx, api.ResumeRunRequest{RunID: "r", NewRunID: "r"})
			return err
		}, session.CodeInvalidArgument},
		{"resume: owner named", func(ctx context.Context, e *engine.Engine) error {
			_, err := e.ResumeRun(ctx, api.ResumeRunRequest{RunID: "r", SessionID: "s"})
			return err
		}, ""},
	}
	forEachStore(t, func(t *testing.T, f storeFactory) {
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				e := newEngine(t, f)
				runFixture(t, e)
				ctx := testkit.Context(t)
				before, err := e.ResumeSession(ctx, "s")
				noErr(t, err)
				err = tc.op(ctx, e)
				wantCode(t, err, tc.code)
				if tc.code != "" {
					after, err := e.ResumeSession(ctx, "s")
					noErr(t, err)
					// Only the setup step of "unrelated run" may commit.
					if after.Generation != before.Generation && tc.name != "resume: new id is an unrelated run of the session" {
						t.Fatalf("failed call committed: generation %d -> %d", before.Generation, after.Generation)
					}
				}
			})
		}
	})
}

func TestCheckpointCommitsMessagesAndBoundaryTogether(t *testing.T) {
	forEachStore(t, func(t *testing.T, f storeFactory) {
		e := newEngine(t, f)
		runFixture(t, e)
		ctx := testkit.Context(t)
		before, err := e.ResumeSession(ctx, "s")
		noErr(t, err)
		res, err := e.Checkpoint(ctx, api.CheckpointRequest{RunID: "r", Turn: 3, NewMessages: []session.Value{msg("tool", 3), msg("a", 4)},
			Usage: session.Usage{TotalTokens: 33}, ToolCallsCount: 5})
		noErr(t, err)
		if res.Generation != before.Generation+1 || res.MessageCount != 5 {
			t.Fatalf("checkpoint = %+v, want one generation and 5 messages", res)
		}
		after, err := e.ResumeSession(ctx, "s")
		noErr(t, err)
		run := after.Snapshot.Runs[0]
		if run.Usage.TotalTokens != 33 || run.ToolCallsCount != 5 {
			t.Fatalf("run not updated with the totals: %+v", run)
		}
		if ir := after.InterruptedRuns[0]; ir.Turn != 3 || ir.MessageCount != 5 {
			t.Fatalf("boundary = %+v", ir)
		}
	})
}

func TestCompleteRunDeletesCheckpoint(t *testing.T) {
	forEachStore(t, func(t *testing.T, f storeFactory) {
		for _, status := range []string{session.RunCompleted, session.RunFailed, session.RunInterrupted} {
			t.Run(status, func(t *testing.T) {
				e := newEngine(t, f)
				runFixture(t, e)
				ctx := testkit.Context(t)
				final := session.Usage{TotalTokens: 99}
				n := int64(9)
				res, err := e.CompleteRun(ctx, api.CompleteRunRequest{RunID: "r", Status: status, Usage: &final, ToolCallsCount: &n})
				noErr(t, err)
				after, err := e.ResumeSession(ctx, "s")
				noErr(t, err)
				if after.Generation != res.Generation {
					t.Fatalf("generation %d, result %d", after.Generation, res.Generation)
				}
				run := after.Snapshot.Runs[0]
				if run.Status != status || run.EndedAt == nil || run.Usage.TotalTokens != 99 || run.ToolCallsCount != 9 {
					t.Fatalf("run = %+v", run)
				}
				if len(after.InterruptedRuns) != 0 {
					t.Fatalf("checkpoint survived: %+v", after.InterruptedRuns)
				}
				sums, err := e.List(ctx)
				noErr(t, err)
				for _, s := range sums {
					if s.SessionID == "s" && s.Checkpoints != 0 {
						t.Fatalf("store still holds %d checkpoints", s.Checkpoints)
					}
				}
				_, err = e.ResumeRun(ctx, api.ResumeRunRequest{RunID: "r"})
				wantCode(t, err, session.CodeNoCheckpoint)
				// Idempotent: the same status again writes nothing.
				again, err := e.CompleteRun(ctx, api.CompleteRunRequest{RunID: "r", Status: status})
				noErr(t, err)
				if again.Generation != res.Generation {
					t.Fatalf("second complete committed: %d -> %d", res.Generation, again.Generation)
				}
			})
		}
	})
}

func TestSaveOfEndedRunDropsCheckpoint(t *testing.T) {
	forEachStore(t, func(t *testing.T, f storeFactory) {
		for _, mode := range []string{"delta", "snapshot"} {
			t.Run(mode, func(t *testing.T) {
				e := newEngine(t, f)
				runFixture(t, e)
				ctx := testkit.Context(t)
				cur, err := e.ResumeSession(ctx, "s")
				noErr(t, err)
				run := cur.Snapshot.Runs[0]
				run.Status = session.RunCompleted
				req := api.SaveRequest{SessionID: "s", Change: &session.Change{UpsertRuns: []session.Run{run}}}
				if mode == "snapshot" {
					snap := cur.Snapshot
					snap.Runs[0] = run
					req = api.SaveRequest{SessionID: "s", Snapshot: snap}
				}
				_, err = e.Save(ctx, req)
				noErr(t, err)
				_, err = e.ResumeRun(ctx, api.ResumeRunRequest{RunID: "r"})
				wantCode(t, err, session.CodeNoCheckpoint)
			})
		}
	})
}

func TestResumeRun(t *testing.T) {
	forEachStore(t, func(t *testing.T, f storeFactory) {
		e := newEngine(t, f)
		runFixture(t, e)
		ctx := testkit.Context(t)
		// A message saved after the boundary (a half-finished turn) is not
		// handed back.
		saveDelta(t, e, "s", msg("partial", 9))

		res, err := e.ResumeRun(ctx, api.ResumeRunRequest{RunID: "r", NewRunID: "r2"})
		noErr(t, err)
		if res.RunID != "r2" || res.ResumedFrom != "r" || res.SessionID != "s" || res.Turn != 2 || res.ToolCallsCount != 3 {
			t.Fatalf("resume = %+v", res)
		}
		if res.Usage != (session.Usage{InputTokens: 10, OutputTokens: 10, TotalTokens: 20, Cost: 1}) {
			t.Fatalf("usage did not carry on: %+v", res.Usage)
		}
		if !bytes.Equal(res.State, session.Value(`{"step":  2}`)) {
			t.Fatalf("state = %q", res.State)
		}
		if len(res.Messages) != 3 || !bytes.Equal(res.Messages[2], msg("a", 2)) {
			t.Fatalf("messages = %q", res.Messages)
		}
		if res.FilesTracked || res.FilesTouchedAfterCheckpoint == nil {
			t.Fatalf("files = %v tracked=%v", res.FilesTouchedAfterCheckpoint, res.FilesTracked)
		}
		s1, err := e.ResumeSession(ctx, "s")
		noErr(t, err)
		old, nw := s1.Snapshot.Runs[0], s1.Snapshot.Runs[len(s1.Snapshot.Runs)-1]
		if old.Status != session.RunInterrupted || old.EndedAt == nil {
			t.Fatalf("old run = %+v", old)
		}
		if nw.RunID != "r2" || nw.ParentRunID != "r" || nw.Status != session.RunRunning || nw.Usage != res.Usage || nw.ToolCallsCount != 3 {
			t.Fatalf("new run = %+v", nw)
		}

		// Idempotent: the same resume again returns the same run, writes nothing.
		again, err := e.ResumeRun(ctx, api.ResumeRunRequest{RunID: "r", NewRunID: "r2"})
		noErr(t, err)
		if mustJSON(t, again) != mustJSON(t, res) {
			t.Fatalf("second resume differs:\n%s\n%s", mustJSON(t, again), mustJSON(t, res))
		}
		s2, err := e.ResumeSession(ctx, "s")
		noErr(t, err)
		if s2.Generation != s1.Generation || len(s2.Snapshot.Runs) != len(s1.Snapshot.Runs) {
			t.Fatalf("idempotent resume wrote: gen %d -> %d", s1.Generation, s2.Generation)
		}
		// The successor has no checkpoint of its own yet.
		_, err = e.ResumeRun(ctx, api.ResumeRunRequest{RunID: "r2"})
		wantCode(t, err, session.CodeNoCheckpoint)
		// Its first turn must follow the resumed boundary.
		_, err = e.Checkpoint(ctx, api.CheckpointRequest{RunID: "r2", Turn: 2})
		wantCode(t, err, session.CodeInvalidArgument)

		// Resuming again under another id supersedes r2.
		r3, err := e.ResumeRun(ctx, api.ResumeRunRequest{RunID: "r"})
		noErr(t, err)
		if r3.RunID == "r2" || r3.Turn != 2 || r3.Usage != res.Usage {
			t.Fatalf("re-resume = %+v", r3)
		}
		_, err = e.Checkpoint(ctx, api.CheckpointRequest{RunID: "r2", Turn: 3})
		wantCode(t, err, session.CodeNotOwner) // superseded by r3
		_, err = e.ResumeRun(ctx, api.ResumeRunRequest{RunID: "r", NewRunID: "r2"})
		wantCode(t, err, session.CodeConflict)

		// The successor's first checkpoint consumes the old boundary.
		_, err = e.Checkpoint(ctx, api.CheckpointRequest{RunID: r3.RunID, Turn: 3, NewMessages: []session.Value{msg("a", 3)},
			Usage: session.Usage{TotalTokens: 25}, ToolCallsCount: 4})
		noErr(t, err)
		_, err = e.ResumeRun(ctx, api.ResumeRunRequest{RunID: "r"})
		wantCode(t, err, session.CodeNoCheckpoint)
		s3, err := e.ResumeSession(ctx, "s")
		noErr(t, err)
		if len(s3.InterruptedRuns) != 1 || s3.InterruptedRuns[0].RunID != r3.RunID {
			t.Fatalf("interrupted runs = %+v", s3.InterruptedRuns)
		}
		// And the chain goes on: resuming r3 carries its own totals.
		r4, err := e.ResumeRun(ctx, api.ResumeRunRequest{RunID: r3.RunID, SessionID: "s"})
		noErr(t, err)
		if r4.Turn != 3 || r4.Usage.TotalTokens != 25 || r4.ToolCallsCount != 4 || len(r4.Messages) != 5 {
			t.Fatalf("second-generation resume = %+v", r4)
		}
		_, err = e.CompleteRun(ctx, api.CompleteRunRequest{RunID: r4.RunID, Status: session.RunCompleted})
		noErr(t, err)
		s4, err := e.ResumeSession(ctx, "s")
		noErr(t, err)
		if len(s4.InterruptedRuns) != 0 {
			t.Fatalf("checkpoints leaked: %+v", s4.InterruptedRuns)
		}
		sums, err := e.List(ctx)
		noErr(t, err)
		for _, s := range sums {
			if s.Checkpoints != 0 {
				t.Fatalf("session %s holds %d checkpoints after every run ended", s.SessionID, s.Checkpoints)
			}
		}
	})
}
