package engine_test

import (
	"fmt"
	"strings"
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
