package engine_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/fxamacker/cbor/v2"

	"github.com/cairn-dev/cairn/api"
	"github.com/cairn-dev/cairn/engine"
	"github.com/cairn-dev/cairn/fsstore"
	"github.com/cairn-dev/cairn/internal/recordlog"
	"github.com/cairn-dev/cairn/internal/testkit"
	"github.com/cairn-dev/cairn/session"
)

// newerCommit is what a newer cairn might append to a session log: a
// checkpoint record for run, closed by a commit record of schema 2.
func newerCommit(t *testing.T, run string, gen uint64) []byte {
	t.Helper()
	cp, err := cbor.Marshal(map[string]any{"run_id": run, "turn": 7, "state": []byte(`{"v":2}`)})
	noErr(t, err)
	buf := recordlog.Append(nil, 'C', cp)
	commit, err := cbor.Marshal(map[int]any{1: 2, 2: gen, 3: time.Now().UTC().Format(time.RFC3339Nano), 4: 1, 5: len(buf)})
	noErr(t, err)
	return recordlog.Append(buf, 'Z', commit)
}

// TestNewerCheckpointAnsweredEverywhere: a run whose latest checkpoint a
// newer cairn wrote is answered with schema_unsupported by every run
// operation, as is its session; list shows the session; other sessions
// and new runs are served.
func TestNewerCheckpointAnsweredEverywhere(t *testing.T) {
	root := t.TempDir()
	ctx := testkit.Context(t)
	st, err := fsstore.Open(root, fsstore.Options{})
	noErr(t, err)
	e := engine.New(st, engine.Options{})
	saveDelta(t, e, "fut", msg("u", 1))
	r, err := e.BeginRun(ctx, api.BeginRunRequest{SessionID: "fut"})
	noErr(t, err)
	cp, err := e.Checkpoint(ctx, api.CheckpointRequest{RunID: r.RunID, Turn: 1, NewMessages: []session.Value{msg("a", 2)}})
	noErr(t, err)
	saveDelta(t, e, "ok", msg("u", 1))
	noErr(t, e.Close())

	f, err := os.OpenFile(filepath.Join(root, ".cairn", "sessions", "s-fut.log"), os.O_WRONLY|os.O_APPEND, 0)
	noErr(t, err)
	_, err = f.Write(newerCommit(t, r.RunID, cp.Generation+1))
	noErr(t, err)
	noErr(t, f.Close())

	st, err = fsstore.Open(root, fsstore.Options{})
	noErr(t, err)
	e = engine.New(st, engine.Options{})
	t.Cleanup(func() { _ = e.Close() })
	_, err = e.ResumeRun(ctx, api.ResumeRunRequest{RunID: r.RunID})
	wantCode(t, err, session.CodeSchemaUnsupported)
	_, err = e.Checkpoint(ctx, api.CheckpointRequest{RunID: r.RunID, Turn: 2})
	wantCode(t, err, session.CodeSchemaUnsupported)
	_, err = e.CompleteRun(ctx, api.CompleteRunRequest{RunID: r.RunID, Status: session.RunCompleted})
	wantCode(t, err, session.CodeSchemaUnsupported)
	_, err = e.ResumeSession(ctx, "fut")
	wantCode(t, err, session.CodeSchemaUnsupported)
	_, err = e.BeginRun(ctx, api.BeginRunRequest{SessionID: "fut"})
	wantCode(t, err, session.CodeSchemaUnsupported)

	list, err := e.List(ctx)
	noErr(t, err)
	if len(list) != 2 || list[0].SessionID != "fut" || list[0].State != fsstore.StateUnsupported || list[1].State != "" {
		t.Fatalf("list: %+v", list)
	}
	if _, err := e.BeginRun(ctx, api.BeginRunRequest{SessionID: "ok"}); err != nil {
		t.Fatalf("a new run in another session: %v", err)
	}
	saveDelta(t, e, "ok", msg("u", 2))
}
