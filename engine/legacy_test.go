package engine_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cairn-dev/cairn/api"
	"github.com/cairn-dev/cairn/engine"
	"github.com/cairn-dev/cairn/fsstore"
	"github.com/cairn-dev/cairn/internal/testkit"
	"github.com/cairn-dev/cairn/session"
)

// testdata/legacy-dup-artifact/s-dup.log was written by cairn before
// appends were checked against the session (commit 912e9b9): its second
// commit appends artifact "plan" again. Such a log must still read, fork,
// export and import, with the later "plan" in place of the earlier.
func TestLegacyDuplicateArtifactID(t *testing.T) {
	ctx := testkit.Context(t)
	openWith := func(t *testing.T, log string) *engine.Engine {
		dir := t.TempDir()
		if log != "" {
			sessions := filepath.Join(dir, ".cairn", "sessions")
			noErr(t, os.MkdirAll(sessions, 0o700))
			data, err := os.ReadFile(log)
			noErr(t, err)
			noErr(t, os.WriteFile(filepath.Join(sessions, filepath.Base(log)), data, 0o600))
		}
		st, err := fsstore.Open(dir, fsstore.Options{})
		noErr(t, err)
		if log != "" {
			// A full replay (history reads, whole-snapshot saves) agrees
			// with the index.
			full, err := st.Load(ctx, "dup", 0)
			noErr(t, err)
			if n := len(full.Snapshot.Artifacts); n != 2 {
				t.Fatalf("replayed legacy log holds %d artifacts, want 2", n)
			}
		}
		e := engine.New(st, engine.Options{})
		t.Cleanup(func() { _ = e.Close() })
		return e
	}
	e := openWith(t, filepath.Join("testdata", "legacy-dup-artifact", "s-dup.log"))

	check := func(t *testing.T, sid string) {
		t.Helper()
		list, err := e.Artifacts(ctx, sid)
		noErr(t, err)
		if len(list.Artifacts) != 2 || list.Artifacts[0].ID != "plan" || list.Artifacts[1].ID != "notes" {
			t.Fatalf("%s artifacts = %+v, want plan then notes", sid, list.Artifacts)
		}
		a, err := e.Artifact(ctx, api.ArtifactRequest{SessionID: sid, ArtifactID: "plan"})
		noErr(t, err)
		if string(a.Artifact.Data) != "second plan" {
			t.Fatalf("%s plan = %q, want the later one", sid, a.Artifact.Data)
		}
	}
	check(t, "dup")
	res, err := e.ResumeSession(ctx, "dup")
	noErr(t, err)
	if len(res.Snapshot.Artifacts) != 2 || len(res.Snapshot.Messages) != 2 {
		t.Fatalf("resume: %d artifacts, %d messages", len(res.Snapshot.Artifacts), len(res.Snapshot.Messages))
	}

	_, err = e.Fork(ctx, api.ForkRequest{SessionID: "dup", NewID: "dup-fork"})
	noErr(t, err)
	check(t, "dup-fork")
	_, err = e.Fork(ctx, api.ForkRequest{SessionID: "dup", NewID: "dup-fork-1", AtGeneration: 1})
	noErr(t, err)

	doc, err := e.Export(ctx, "dup")
	noErr(t, err)
	noErr(t, e.Delete(ctx, "dup"))
	_, err = e.Import(ctx, doc)
	noErr(t, err)
	check(t, "dup")

	other := openWith(t, "")
	_, err = other.Import(ctx, doc)
	noErr(t, err)

	// New appends of an id the session holds are refused, naming it.
	_, err = e.Save(ctx, api.SaveRequest{SessionID: "dup", Change: &session.Change{AppendArtifacts: []session.Artifact{{ID: "plan", Data: []byte("x")}}}})
	wantCode(t, err, session.CodeConflict)
	if err == nil || !strings.Contains(err.Error(), `"plan"`) {
		t.Fatalf("conflict does not name the id: %v", err)
	}
}
