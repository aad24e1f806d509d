package fsstore_test

import (
	"context"
	"testing"

	"github.com/cairn-dev/cairn/fsstore"
	"github.com/cairn-dev/cairn/session"
)

// TestCheckpointSession: CheckpointSession names the session Checkpoint's
// answer names, and fails as Checkpoint fails, before and after a reopen.
func TestCheckpointSession(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	st := openT(t, dir, fsstore.Options{})
	commit := func(sid string, c *session.Change) {
		t.Helper()
		if _, err := st.Commit(ctx, sid, c, session.CommitOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, sid := range []string{"a", "b/c", "d"} {
		commit(sid, &session.Change{AppendMessages: []session.Value{session.Value(`{"m":1}`)}})
		commit(sid, &session.Change{Checkpoint: &session.LoopCheckpoint{RunID: "r-" + sid, Turn: 1, State: session.Value(`{"k":1}`)}})
	}
	commit("a", &session.Change{Checkpoint: &session.LoopCheckpoint{RunID: "r-a2", Turn: 1}})
	commit("a", &session.Change{DropCheckpoints: []string{"r-a2"}})
	check := func(st *fsstore.Store) {
		t.Helper()
		for _, run := range []string{"r-a", "r-b/c", "r-d", "r-a2", "nobody", ""} {
			sid, err := st.CheckpointSession(ctx, run)
			cp, cerr := st.Checkpoint(ctx, run)
			switch {
			case (err == nil) != (cerr == nil) || session.CodeOf(err) != session.CodeOf(cerr):
				t.Errorf("run %q: CheckpointSession %q, %v; Checkpoint %v", run, sid, err, cerr)
			case err == nil && sid != cp.SessionID:
				t.Errorf("run %q: CheckpointSession %q; Checkpoint names %q", run, sid, cp.SessionID)
			case err == nil && sid != run[2:]:
				t.Errorf("run %q: CheckpointSession %q", run, sid)
			}
		}
	}
	check(st)
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	check(openT(t, dir, fsstore.Options{}))
}
