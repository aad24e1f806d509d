package engine_test

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/cairn-dev/cairn/api"
	"github.com/cairn-dev/cairn/engine"
	"github.com/cairn-dev/cairn/fsstore"
	"github.com/cairn-dev/cairn/internal/testkit"
	"github.com/cairn-dev/cairn/session"
)

// TestRunOperationsReadOnlyRuns checks that the run operations and reads
// (beginRun, checkpoint, run, completeRun, resumeRun) read the session's
// runs and checkpoints, not the rest of its head: with a 256 KiB handoff,
// a 256 KiB metadata value and 100 verifications of 4 KiB output in the
// session, none of them reads 64 KiB, where reading its whole head (as
// Store.Head does, and they did) reads over 900 KiB. What they answer is
// unchanged: the run and its checkpoint read back, and the head still
// holds the rest.
func TestRunOperationsReadOnlyRuns(t *testing.T) {
	fs := testkit.NewReadCountFS()
	st, err := fsstore.Open(t.TempDir(), fsstore.Options{FS: fs})
	noErr(t, err)
	e := engine.New(st, engine.Options{})
	t.Cleanup(func() { _ = e.Close() })
	ctx := testkit.Context(t)

	big := strings.Repeat("h", 256<<10)
	c := &session.Change{
		AppendMessages: []session.Value{msg("u", 1)},
		Handoff:        &session.Handoff{Done: []string{big}},
		Metadata:       map[string]session.Value{"notes": session.Value(`"` + big + `"`)},
	}
	for i := range 100 {
		c.UpsertVerifications = append(c.UpsertVerifications, session.Verification{ID: fmt.Sprintf("v%d", i),
			Checks: []session.Check{{Name: "test", Status: "passed", Output: strings.Repeat("o", 4<<10)}}})
	}
	_, err = e.Save(ctx, api.SaveRequest{SessionID: "s", Change: c})
	noErr(t, err)

	const most = 64 << 10
	read := func(op string, fn func() error) {
		t.Helper()
		before := fs.Bytes.Load()
		noErr(t, fn())
		if n := fs.Bytes.Load() - before; n > most {
			t.Fatalf("%s read %d bytes, want at most %d", op, n, most)
		}
	}
	var run string
	read("beginRun", func() error {
		r, err := e.BeginRun(ctx, api.BeginRunRequest{SessionID: "s"})
		run = r.RunID
		return err
	})
	for turn := int64(1); turn <= 2; turn++ {
		read("checkpoint", func() error {
			_, err := e.Checkpoint(ctx, api.CheckpointRequest{RunID: run, Turn: turn, NewMessages: []session.Value{msg("a", int(turn))},
				State: session.Value(fmt.Sprintf(`{"turn":%d}`, turn))})
			return err
		})
	}
	read("run", func() error {
		r, err := e.Run(ctx, api.RunRequest{RunID: run})
		if err == nil && (r.Run.RunID != run || r.Checkpoint == nil || r.Checkpoint.Turn != 2 || string(r.Checkpoint.State) != `{"turn":2}`) {
			return fmt.Errorf("run answers %+v, checkpoint %+v", r.Run, r.Checkpoint)
		}
		return err
	})
	var resumed string
	read("resumeRun", func() error {
		r, err := e.ResumeRun(ctx, api.ResumeRunRequest{RunID: run})
		if err == nil {
			resumed = r.RunID
			if r.Turn != 2 || string(r.State) != `{"turn":2}` {
				return fmt.Errorf("resumeRun answers turn %d, state %s", r.Turn, r.State)
			}
		}
		return err
	})
	read("completeRun", func() error {
		_, err := e.CompleteRun(ctx, api.CompleteRunRequest{RunID: resumed, Status: session.RunCompleted})
		return err
	})

	head, _, err := st.Head(ctx, "s")
	noErr(t, err)
	if head.Snapshot.Handoff == nil || len(head.Snapshot.Verifications) != 100 || len(head.Snapshot.Metadata) != 1 || len(head.Snapshot.Runs) != 2 {
		t.Fatalf("head after the run operations: handoff %v, %d verifications, %d metadata keys, %d runs",
			head.Snapshot.Handoff != nil, len(head.Snapshot.Verifications), len(head.Snapshot.Metadata), len(head.Snapshot.Runs))
	}
}

// lookupCountStore is an fsstore that counts the look-ups of a run
// through every session (CheckpointSession, FindRun).
type lookupCountStore struct {
	*fsstore.Store
	lookups atomic.Int64
}

func (s *lookupCountStore) CheckpointSession(ctx context.Context, runID string) (string, error) {
	s.lookups.Add(1)
	return s.Store.CheckpointSession(ctx, runID)
}

func (s *lookupCountStore) FindRun(ctx context.Context, runID string) (string, error) {
	s.lookups.Add(1)
	return s.Store.FindRun(ctx, runID)
}

// TestRunOperationsFindTheirSession checks that a run's checkpoints and
// completion, without a session named, go to the session the run was
// begun in without looking through every session of the store (which
// costs what the workspace holds: 2.6 ms a checkpoint among 10,000
// sessions, against 0.39 ms alone); that a run whose session was deleted
// or replaced since is then looked for the long way (not_found, as for
// an unknown run, or the copy a fork made, where it is not running); and
// that another engine on the same store, which has not seen the run
// begin, finds it the long way.
func TestRunOperationsFindTheirSession(t *testing.T) {
	root := t.TempDir()
	fs, err := fsstore.Open(root, fsstore.Options{})
	noErr(t, err)
	st := &lookupCountStore{Store: fs}
	e := engine.New(st, engine.Options{})
	ctx := testkit.Context(t)
	for _, sid := range []string{"a", "b", "c", "c2"} {
		saveDelta(t, e, sid, msg("u", 1))
	}
	r, err := e.BeginRun(ctx, api.BeginRunRequest{SessionID: "b"})
	noErr(t, err)
	st.lookups.Store(0) // beginRun looks its new id up, to be sure it is free
	for turn := int64(1); turn <= 5; turn++ {
		_, err := e.Checkpoint(ctx, api.CheckpointRequest{RunID: r.RunID, Turn: turn, NewMessages: []session.Value{msg("a", int(turn))}})
		noErr(t, err)
	}
	_, err = e.CompleteRun(ctx, api.CompleteRunRequest{RunID: r.RunID, Status: session.RunCompleted})
	noErr(t, err)
	if n := st.lookups.Load(); n != 0 {
		t.Fatalf("5 checkpoints and a completeRun looked through every session %d times, want 0", n)
	}
	head, _, err := fs.Head(ctx, "b")
	noErr(t, err)
	if len(head.Snapshot.Runs) != 1 || head.Snapshot.Runs[0].Status != session.RunCompleted || head.Snapshot.Generation != 8 {
		t.Fatalf("session b: runs %+v at generation %d", head.Snapshot.Runs, head.Snapshot.Generation)
	}

	// Its session deleted, a run is not found.
	gone, err := e.BeginRun(ctx, api.BeginRunRequest{SessionID: "c"})
	noErr(t, err)
	noErr(t, e.Delete(ctx, "c"))
	_, err = e.Checkpoint(ctx, api.CheckpointRequest{RunID: gone.RunID, Turn: 1})
	wantCode(t, err, session.CodeNotFound)

	// Its session deleted after a fork copied it, the run is found in the
	// copy, where it is not running.
	forked, err := e.BeginRun(ctx, api.BeginRunRequest{SessionID: "c2"})
	noErr(t, err)
	_, err = e.Checkpoint(ctx, api.CheckpointRequest{RunID: forked.RunID, Turn: 1})
	noErr(t, err)
	_, err = e.Fork(ctx, api.ForkRequest{SessionID: "c2", NewID: "c2-copy"})
	noErr(t, err)
	noErr(t, e.Delete(ctx, "c2"))
	_, err = e.Checkpoint(ctx, api.CheckpointRequest{RunID: forked.RunID, Turn: 2})
	wantCode(t, err, session.CodeConflict) // interrupted, not running

	// Its session replaced by a snapshot without it, likewise.
	replaced, err := e.BeginRun(ctx, api.BeginRunRequest{SessionID: "a"})
	noErr(t, err)
	_, err = e.Save(ctx, api.SaveRequest{SessionID: "a", Snapshot: &session.Snapshot{Messages: []session.Value{msg("u", 9)}}})
	noErr(t, err)
	_, err = e.CompleteRun(ctx, api.CompleteRunRequest{RunID: replaced.RunID, Status: session.RunFailed})
	wantCode(t, err, session.CodeNotFound)

	// Another engine on the store finds a running run the long way.
	live, err := e.BeginRun(ctx, api.BeginRunRequest{SessionID: "b"})
	noErr(t, err)
	noErr(t, e.Close())
	fs2, err := fsstore.Open(root, fsstore.Options{})
	noErr(t, err)
	st2 := &lookupCountStore{Store: fs2}
	e2 := engine.New(st2, engine.Options{})
	t.Cleanup(func() { _ = e2.Close() })
	_, err = e2.Checkpoint(ctx, api.CheckpointRequest{RunID: live.RunID, Turn: 1})
	noErr(t, err)
	if st2.lookups.Load() == 0 {
		t.Fatal("a new engine found a run without looking for it")
	}
}
