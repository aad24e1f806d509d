package engine_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/api"
	"github.com/cairn-dev/cairn/engine"
	"github.com/cairn-dev/cairn/internal/testkit"
	"github.com/cairn-dev/cairn/session"
)

// wantSuperseded fails unless err is not_owner and names every run in names.
func wantSuperseded(t *testing.T, err error, names ...string) {
	t.Helper()
	wantCode(t, err, session.CodeNotOwner)
	for _, n := range names {
		if !strings.Contains(err.Error(), `"`+n+`"`) {
			t.Fatalf("error %q does not name run %q", err, n)
		}
	}
}

// interrupted returns "run>resumed_as" for each of the session's
// interrupted runs.
func interrupted(t *testing.T, e *engine.Engine, sid string) []string {
	t.Helper()
	res, err := e.ResumeSession(testkit.Context(t), sid)
	noErr(t, err)
	out := []string{}
	for _, ir := range res.InterruptedRuns {
		out = append(out, ir.RunID+">"+ir.ResumedAs)
	}
	return out
}

func runStatus(t *testing.T, e *engine.Engine, sid, runID string) string {
	t.Helper()
	res, err := e.ResumeSession(testkit.Context(t), sid)
	noErr(t, err)
	for _, r := range res.Snapshot.Runs {
		if r.RunID == runID {
			return r.Status
		}
	}
	t.Fatalf("session %s records no run %s", sid, runID)
	return ""
}

// TestRunLine is the scenario: after resumeRun(r) -> r2, writes to
// the original run r are refused with not_owner naming r2, and r2 stays
// the live, resumable end of the line.
func TestRunLine(t *testing.T) {
	forEachStore(t, func(t *testing.T, f storeFactory) {
		e := newEngine(t, f)
		ctx := testkit.Context(t)
		saveDelta(t, e, "s", msg("user", 0))
		_, err := e.BeginRun(ctx, api.BeginRunRequest{SessionID: "s", RunID: "r"})
		noErr(t, err)
		_, err = e.Checkpoint(ctx, api.CheckpointRequest{RunID: "r", Turn: 1, NewMessages: []session.Value{msg("a", 1)}})
		noErr(t, err)
		r2, err := e.ResumeRun(ctx, api.ResumeRunRequest{RunID: "r", NewRunID: "r2"})
		noErr(t, err)
		gen := func() uint64 {
			res, err := e.ResumeSession(ctx, "s")
			noErr(t, err)
			return res.Generation
		}
		before := gen()

		// The original run is read-only now, whatever is asked and
		// however it is addressed; nothing is written.
		for _, status := range []string{session.RunCompleted, session.RunFailed, session.RunInterrupted} {
			for _, hint := range []string{"", "s"} {
				_, err = e.CompleteRun(ctx, api.CompleteRunRequest{RunID: "r", SessionID: hint, Status: status})
				wantSuperseded(t, err, "r", "r2")
			}
		}
		_, err = e.Checkpoint(ctx, api.CheckpointRequest{RunID: "r", Turn: 2})
		wantSuperseded(t, err, "r2")
		if g := gen(); g != before {
			t.Fatalf("refused calls committed: generation %d -> %d", before, g)
		}
		if got := runStatus(t, e, "s", "r2"); got != session.RunRunning {
			t.Fatalf("r2 is %s", got)
		}
		// r's boundary is still there for r2, and listed as resumed as r2.
		if got := interrupted(t, e, "s"); len(got) != 1 || got[0] != "r>r2" {
			t.Fatalf("interrupted runs = %v", got)
		}
		// Retrying the same resume is idempotent.
		again, err := e.ResumeRun(ctx, api.ResumeRunRequest{RunID: "r", NewRunID: "r2"})
		noErr(t, err)
		if mustJSON(t, again) != mustJSON(t, r2) || gen() != before {
			t.Fatalf("retried resume differs or wrote")
		}

		// r2's first checkpoint consumes r's boundary; r stays refused.
		_, err = e.Checkpoint(ctx, api.CheckpointRequest{RunID: "r2", Turn: 2, NewMessages: []session.Value{msg("a", 2)}})
		noErr(t, err)
		_, err = e.CompleteRun(ctx, api.CompleteRunRequest{RunID: "r", Status: session.RunInterrupted})
		wantSuperseded(t, err, "r2")
		_, err = e.ResumeRun(ctx, api.ResumeRunRequest{RunID: "r"})
		wantCode(t, err, session.CodeNoCheckpoint)
		if !strings.Contains(err.Error(), `"r2"`) {
			t.Fatalf("no_checkpoint does not name the successor: %v", err)
		}
		_, err = e.ResumeRun(ctx, api.ResumeRunRequest{RunID: "r", NewRunID: "r2"})
		wantCode(t, err, session.CodeNoCheckpoint)

		// The line goes on: r2 -> r3 (pending), then r2 again -> r4, which
		// supersedes r3. Errors name the direct successor and the line's
		// latest run.
		_, err = e.ResumeRun(ctx, api.ResumeRunRequest{RunID: "r2", NewRunID: "r3"})
		noErr(t, err)
		_, err = e.CompleteRun(ctx, api.CompleteRunRequest{RunID: "r", Status: session.RunCompleted})
		wantSuperseded(t, err, "r", "r2", "r3")
		_, err = e.ResumeRun(ctx, api.ResumeRunRequest{RunID: "r2", NewRunID: "r4"})
		noErr(t, err)
		_, err = e.CompleteRun(ctx, api.CompleteRunRequest{RunID: "r3", Status: session.RunCompleted})
		wantSuperseded(t, err, "r3", "r4")
		_, err = e.Checkpoint(ctx, api.CheckpointRequest{RunID: "r3", Turn: 3})
		wantSuperseded(t, err, "r4")
		_, err = e.CompleteRun(ctx, api.CompleteRunRequest{RunID: "r2", Status: session.RunCompleted})
		wantSuperseded(t, err, "r2", "r4")
		if got := interrupted(t, e, "s"); len(got) != 1 || got[0] != "r2>r4" {
			t.Fatalf("interrupted runs = %v", got)
		}

		// Ending the head ends the line: its pending boundary is released.
		_, err = e.CompleteRun(ctx, api.CompleteRunRequest{RunID: "r4", Status: session.RunCompleted})
		noErr(t, err)
		if got := interrupted(t, e, "s"); len(got) != 0 {
			t.Fatalf("interrupted runs after the line ended = %v", got)
		}
		for _, id := range []string{"r", "r2", "r3"} {
			_, err = e.CompleteRun(ctx, api.CompleteRunRequest{RunID: id, Status: session.RunCompleted})
			wantCode(t, err, session.CodeNotOwner)
		}
		for id, want := range map[string]string{"r": session.RunInterrupted, "r2": session.RunInterrupted, "r3": session.RunInterrupted, "r4": session.RunCompleted} {
			if got := runStatus(t, e, "s", id); got != want {
				t.Fatalf("run %s is %s, want %s", id, got, want)
			}
		}
	})
}

// TestRunLineFork: a fork copies the line's run ids as records; the
// original session keeps the live line and the fork's copies never take a
// write meant for it.
func TestRunLineFork(t *testing.T) {
	forEachStore(t, func(t *testing.T, f storeFactory) {
		e := newEngine(t, f)
		ctx := testkit.Context(t)
		saveDelta(t, e, "s", msg("user", 0))
		_, err := e.BeginRun(ctx, api.BeginRunRequest{SessionID: "s", RunID: "r"})
		noErr(t, err)
		_, err = e.Checkpoint(ctx, api.CheckpointRequest{RunID: "r", Turn: 1, NewMessages: []session.Value{msg("a", 1)}})
		noErr(t, err)
		_, err = e.ResumeRun(ctx, api.ResumeRunRequest{RunID: "r", NewRunID: "r2"})
		noErr(t, err)
		_, err = e.Fork(ctx, api.ForkRequest{SessionID: "s", NewID: "f"})
		noErr(t, err)

		// In the fork the line is copied, not live.
		if got := runStatus(t, e, "f", "r2"); got != session.RunInterrupted {
			t.Fatalf("fork's r2 is %s", got)
		}
		if got := interrupted(t, e, "f"); len(got) != 0 {
			t.Fatalf("fork lists resumable runs %v", got)
		}
		_, err = e.CompleteRun(ctx, api.CompleteRunRequest{RunID: "r", SessionID: "f", Status: session.RunCompleted})
		wantSuperseded(t, err, "r2")
		_, err = e.ResumeRun(ctx, api.ResumeRunRequest{RunID: "r", SessionID: "f"})
		wantCode(t, err, session.CodeNoCheckpoint)

		// Without a session_id the run ids resolve to the live line.
		_, err = e.Checkpoint(ctx, api.CheckpointRequest{RunID: "r2", Turn: 2, NewMessages: []session.Value{msg("a", 2)}})
		noErr(t, err)
		_, err = e.CompleteRun(ctx, api.CompleteRunRequest{RunID: "r2", Status: session.RunCompleted})
		noErr(t, err)
		if got := runStatus(t, e, "s", "r2"); got != session.RunCompleted {
			t.Fatalf("s's r2 is %s", got)
		}
		if got := runStatus(t, e, "f", "r2"); got != session.RunInterrupted {
			t.Fatalf("the fork's copy of r2 changed: %s", got)
		}
	})
}

// loadCounter counts whole-session reads of the latest generation.
type loadCounter struct {
	session.Store
	latest atomic.Int64
}

func (l *loadCounter) Load(ctx context.Context, sid string, at uint64) (*session.State, error) {
	if at == 0 {
		l.latest.Add(1)
	}
	return l.Store.Load(ctx, sid, at)
}

// TestRunOperationsReadNoWholeSession: beginRun, checkpoint, completeRun,
// resumeRun, the runtime reads and the handoff check a run through the
// store's targeted reads, never a whole-session Load.
func TestRunOperationsReadNoWholeSession(t *testing.T) {
	forEachStore(t, func(t *testing.T, f storeFactory) {
		lc := &loadCounter{Store: openStore(t, f)}
		clock := &fakeClock{t: time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)}
		e := engine.New(lc, engine.Options{Now: clock.Now, NewRunID: (&seqIDs{}).Next, ProbeTimeout: -1})
		t.Cleanup(func() { _ = e.Close() })
		ctx := testkit.Context(t)
		saveDelta(t, e, "s", msg("user", 0))
		saveDelta(t, e, "t", msg("user", 0))
		// A run id recorded by two sessions, running in neither "guess":
		// the search for where it runs reads heads too.
		_, err := e.BeginRun(ctx, api.BeginRunRequest{SessionID: "s", RunID: "r"})
		noErr(t, err)
		_, err = e.Fork(ctx, api.ForkRequest{SessionID: "s", NewID: "a-fork"})
		noErr(t, err)
		lc.latest.Store(0)

		_, err = e.Checkpoint(ctx, api.CheckpointRequest{RunID: "r", Turn: 1, NewMessages: []session.Value{msg("a", 1)}})
		noErr(t, err)
		res, err := e.ResumeRun(ctx, api.ResumeRunRequest{RunID: "r"})
		noErr(t, err)
		if len(res.Messages) != 2 {
			t.Fatalf("resume returned %d messages, want the 2 up to the boundary", len(res.Messages))
		}
		_, err = e.ResumeRun(ctx, api.ResumeRunRequest{RunID: "r", NewRunID: res.RunID})
		noErr(t, err)
		_, err = e.CompleteRun(ctx, api.CompleteRunRequest{RunID: "r", Status: session.RunCompleted})
		wantCode(t, err, session.CodeNotOwner)
		_, err = e.CompleteRun(ctx, api.CompleteRunRequest{RunID: res.RunID, Status: session.RunCompleted})
		noErr(t, err)
		_, err = e.BeginRun(ctx, api.BeginRunRequest{SessionID: "t"})
		noErr(t, err)
		_, err = e.RuntimeCheck(ctx, api.RuntimeCheckRequest{SessionID: "s"})
		noErr(t, err)
		_, err = e.Handoff(ctx, api.HandoffRequest{SessionID: "s"})
		noErr(t, err)
		if n := lc.latest.Load(); n != 0 {
			t.Fatalf("run operations loaded a whole session %d times", n)
		}
	})
}
