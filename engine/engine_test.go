package engine_test

import (
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/cairn-dev/cairn/api"
	"github.com/cairn-dev/cairn/engine"
	"github.com/cairn-dev/cairn/fsstore"
	"github.com/cairn-dev/cairn/internal/testkit"
	"github.com/cairn-dev/cairn/session"
)

func TestCapabilitiesAndClose(t *testing.T) {
	forEachStore(t, func(t *testing.T, f storeFactory) {
		dir := t.TempDir()
		st, err := f.open(dir)
		noErr(t, err)
		e := engine.New(st, engine.Options{})
		if e.Capabilities() != st.Capabilities() {
			t.Fatalf("capabilities %+v, store %+v", e.Capabilities(), st.Capabilities())
		}
		ctx := testkit.Context(t)
		saveDelta(t, e, "s", msg("u", 1))
		calls := 0
		e.Subscribe(func(api.Event) { calls++ })
		noErr(t, e.Close())
		noErr(t, e.Close()) // a second Close is harmless
		_, err = e.Save(ctx, api.SaveRequest{SessionID: "s", Change: &session.Change{}})
		if !errors.Is(err, session.ErrInternal) || !errors.Is(err, engine.ErrClosed) {
			t.Fatalf("save after close: %v", err)
		}
		_, err = e.ResumeSession(ctx, "s")
		wantCode(t, err, session.CodeInternal)
		if calls != 0 {
			t.Fatal("event after close")
		}
		// Close closed the store too: fsstore released its writer lock,
		// so the same root opens again.
		again, err := f.open(dir)
		noErr(t, err)
		noErr(t, again.Close())
	})
}

// TestStoreErrorsPassThrough: store-level codes (too_large, locked) reach
// the caller unchanged, and a failed commit leaves nothing behind.
func TestStoreErrorsPassThrough(t *testing.T) {
	root := t.TempDir()
	st, err := fsstore.Open(root, fsstore.Options{MaxCommitBytes: 4 << 10})
	noErr(t, err)
	e := engine.New(st, engine.Options{})
	t.Cleanup(func() { _ = e.Close() })
	ctx := testkit.Context(t)
	saveDelta(t, e, "s", msg("u", 1))
	big := session.Value(`"` + strings.Repeat("x", 8<<10) + `"`)
	_, err = e.Save(ctx, api.SaveRequest{SessionID: "s", Change: &session.Change{AppendMessages: []session.Value{big}}})
	wantCode(t, err, session.CodeTooLarge)
	r, err := e.BeginRun(ctx, api.BeginRunRequest{SessionID: "s"})
	noErr(t, err)
	_, err = e.Checkpoint(ctx, api.CheckpointRequest{RunID: r.RunID, Turn: 1, NewMessages: []session.Value{big}})
	wantCode(t, err, session.CodeTooLarge)
	res, err := e.ResumeSession(ctx, "s")
	noErr(t, err)
	if res.Generation != 2 || len(res.Snapshot.Messages) != 1 || len(res.InterruptedRuns) != 0 {
		t.Fatalf("too-large commits left traces: generation %d, %d messages", res.Generation, len(res.Snapshot.Messages))
	}

	_, err = fsstore.Open(root, fsstore.Options{})
	wantCode(t, err, session.CodeLocked)
}

// TestOutsideWriters: the engine's cached view never hides a commit made
// around it, and two engines over one store keep every turn (their
// read-modify-writes are compare-and-swaps that retry).
func TestOutsideWriters(t *testing.T) {
	forEachStore(t, func(t *testing.T, f storeFactory) {
		st := openStore(t, f)
		e1 := engine.New(st, engine.Options{})
		e2 := engine.New(st, engine.Options{}) // shares the store; closed by e1
		t.Cleanup(func() { _ = e1.Close() })
		ctx := testkit.Context(t)
		saveDelta(t, e1, "s", msg("u", 0))
		r, err := e1.BeginRun(ctx, api.BeginRunRequest{SessionID: "s"})
		noErr(t, err)
		_, err = e1.Checkpoint(ctx, api.CheckpointRequest{RunID: r.RunID, Turn: 1, NewMessages: []session.Value{msg("a", 1)}})
		noErr(t, err)
		// A commit straight to the store, behind the engine's back.
		_, err = st.Commit(ctx, "s", &session.Change{AppendMessages: []session.Value{msg("outside", 2)}}, session.CommitOptions{})
		noErr(t, err)
		cp, err := e1.Checkpoint(ctx, api.CheckpointRequest{RunID: r.RunID, Turn: 2, NewMessages: []session.Value{msg("a", 3)}})
		noErr(t, err)
		if cp.MessageCount != 4 || cp.Generation != 5 {
			t.Fatalf("checkpoint after an outside commit = %+v, want 4 messages at generation 5", cp)
		}
		// Delete and re-create behind the engine's back.
		noErr(t, st.Delete(ctx, "s"))
		_, err = st.Commit(ctx, "s", &session.Change{AppendMessages: []session.Value{msg("u", 9)}}, session.CommitOptions{})
		noErr(t, err)
		_, err = e1.Checkpoint(ctx, api.CheckpointRequest{RunID: r.RunID, Turn: 3})
		wantCode(t, err, session.CodeNotFound)

		// Two engines checkpointing runs of one session at once.
		r1, err := e1.BeginRun(ctx, api.BeginRunRequest{SessionID: "s"})
		noErr(t, err)
		r2, err := e2.BeginRun(ctx, api.BeginRunRequest{SessionID: "s", RunID: "other"})
		noErr(t, err)
		const turns = 25
		var wg sync.WaitGroup
		errs := make(chan error, 2*turns)
		for _, x := range []struct {
			e   *engine.Engine
			run string
		}{{e1, r1.RunID}, {e2, r2.RunID}} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for k := 1; k <= turns; k++ {
					if _, err := x.e.Checkpoint(ctx, api.CheckpointRequest{RunID: x.run, Turn: int64(k), NewMessages: []session.Value{msg(x.run, k)}, ToolCallsCount: int64(k)}); err != nil {
						errs <- err
					}
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		res, err := e2.ResumeSession(ctx, "s")
		noErr(t, err)
		if len(res.Snapshot.Messages) != 1+2*turns || len(res.InterruptedRuns) != 2 {
			t.Fatalf("%d messages, %d resumable runs", len(res.Snapshot.Messages), len(res.InterruptedRuns))
		}
		for _, ir := range res.InterruptedRuns {
			if ir.Turn != turns || ir.ToolCallsCount != turns {
				t.Fatalf("run %+v lost turns", ir)
			}
		}
	})
}
