package engine_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/cairn-dev/cairn/api"
	"github.com/cairn-dev/cairn/engine"
	"github.com/cairn-dev/cairn/fsstore"
	"github.com/cairn-dev/cairn/internal/testkit"
	"github.com/cairn-dev/cairn/session"
	"github.com/cairn-dev/cairn/workspace"
)

// tracked opens an engine over fsstore with a workspace tracker on dir, as
// the daemon does. close releases both.
func tracked(t *testing.T, dir string) (e *engine.Engine, closeAll func()) {
	t.Helper()
	st, err := fsstore.Open(dir, fsstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	tr, err := workspace.Open(dir, workspace.Options{})
	if err != nil {
		st.Close()
		t.Fatal(err)
	}
	e = engine.New(st, engine.Options{Workspace: tr})
	return e, func() {
		e.Close()
		tr.Close()
	}
}

// TestDriftAcrossRestart saves a session, stops everything, changes files,
// starts again, and checks that resume names exactly those changes.
func TestDriftAcrossRestart(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	testkit.WriteFile(t, dir, "keep.go", "package keep")
	testkit.WriteFile(t, dir, "edit.go", "package edit")
	testkit.WriteFile(t, dir, "gone/old.txt", "old")
	e, closeAll := tracked(t, dir)
	if _, err := e.Save(ctx, api.SaveRequest{SessionID: "s", Change: &session.Change{AppendMessages: []session.Value{session.Value(`1`)}}}); err != nil {
		t.Fatal(err)
	}
	got, err := e.ResumeSession(ctx, "s")
	if err != nil {
		t.Fatal(err)
	}
	if !got.Drift.Tracked || len(got.Drift.Added)+len(got.Drift.Modified)+len(got.Drift.Deleted) != 0 {
		t.Fatalf("drift right after the save: %+v", got.Drift)
	}
	closeAll()

	// While nothing runs: one file modified, one deleted, one added.
	testkit.WriteFile(t, dir, "edit.go", "package edit // changed")
	if err := os.Remove(filepath.Join(dir, "gone/old.txt")); err != nil {
		t.Fatal(err)
	}
	testkit.WriteFile(t, dir, "new/added.md", "# new")

	e, closeAll = tracked(t, dir)
	defer closeAll()
	got, err = e.ResumeSession(ctx, "s")
	if err != nil {
		t.Fatal(err)
	}
	d := got.Drift
	if !d.Tracked || !slices.Equal(d.Added, []string{"new/added.md"}) || !slices.Equal(d.Modified, []string{"edit.go"}) || !slices.Equal(d.Deleted, []string{"gone/old.txt"}) {
		t.Fatalf("drift after restart = %+v", d)
	}
}

// TestRunAttribution checkpoints a run, writes two files as a tool call in
// flight would, "dies", and checks ResumeRun names exactly those two.
func TestRunAttribution(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	testkit.WriteFile(t, dir, "src/a.go", "package a")
	e, closeAll := tracked(t, dir)
	defer closeAll()
	if _, err := e.Save(ctx, api.SaveRequest{SessionID: "s", Change: &session.Change{}}); err != nil {
		t.Fatal(err)
	}
	run, err := e.BeginRun(ctx, api.BeginRunRequest{SessionID: "s", RunID: "r"})
	if err != nil {
		t.Fatal(err)
	}
	testkit.WriteFile(t, dir, "src/before.go", "written before the checkpoint")
	if _, err := e.Checkpoint(ctx, api.CheckpointRequest{RunID: run.RunID, Turn: 1, NewMessages: []session.Value{session.Value(`"t1"`)}}); err != nil {
		t.Fatal(err)
	}
	testkit.WriteFile(t, dir, "src/a.go", "package a // half-rewritten")
	testkit.WriteFile(t, dir, "out/report.txt", "partial")
	res, err := e.ResumeRun(ctx, api.ResumeRunRequest{RunID: run.RunID})
	if err != nil {
		t.Fatal(err)
	}
	if !res.FilesTracked || !slices.Equal(res.FilesTouchedAfterCheckpoint, []string{"out/report.txt", "src/a.go"}) {
		t.Fatalf("files touched after the checkpoint = %v (tracked %v)", res.FilesTouchedAfterCheckpoint, res.FilesTracked)
	}
}

// TestDriftUntracked checks the honest answer without a tracker.
func TestDriftUntracked(t *testing.T) {
	ctx := context.Background()
	e := engine.New(session.NewMemStore(), engine.Options{})
	defer e.Close()
	if _, err := e.Save(ctx, api.SaveRequest{SessionID: "s", Change: &session.Change{}}); err != nil {
		t.Fatal(err)
	}
	got, err := e.ResumeSession(ctx, "s")
	if err != nil {
		t.Fatal(err)
	}
	if got.Drift.Tracked || got.Drift.Reason == "" {
		t.Fatalf("untracked drift = %+v", got.Drift)
	}
}

// TestWholeSnapshotSaveIsStamped checks that a whole-snapshot save (a
// replace, not reducible to a delta) records the manifest too.
func TestWholeSnapshotSaveIsStamped(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	e, closeAll := tracked(t, dir)
	defer closeAll()
	for _, msgs := range [][]session.Value{{session.Value(`1`), session.Value(`2`)}, {session.Value(`3`)}} {
		if _, err := e.Save(ctx, api.SaveRequest{SessionID: "s", Snapshot: &session.Snapshot{Messages: msgs}}); err != nil {
			t.Fatal(err)
		}
		got, err := e.ResumeSession(ctx, "s")
		if err != nil {
			t.Fatal(err)
		}
		if got.Snapshot.Files == nil || !got.Drift.Tracked {
			t.Fatalf("snapshot save left no manifest: files %v, drift %+v", got.Snapshot.Files, got.Drift)
		}
	}
}
