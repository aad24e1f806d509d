package main_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// newWorkspace returns a new temp dir made a workspace with cairn init.
func newWorkspace(t *testing.T) string {
	t.Helper()
	ws := t.TempDir()
	if out, errs, code := cli(t, ws, "", "init"); code != 0 {
		t.Fatalf("cairn init: %d %q %q", code, out, errs)
	}
	return ws
}

// entries lists what is under dir, relative to it.
func entries(t *testing.T, dir string) []string {
	t.Helper()
	var names []string
	filepath.WalkDir(dir, func(p string, _ os.DirEntry, err error) error {
		if p != dir {
			rel, _ := filepath.Rel(dir, p)
			names = append(names, rel)
		}
		return nil
	})
	return names
}

// TestDiscoveryFromSubfolder: commands in a folder below a workspace work
// on that workspace, and make no .cairn of their own.
func TestDiscoveryFromSubfolder(t *testing.T) {
	ws := newWorkspace(t)
	t.Cleanup(func() { cli(t, ws, "", "daemon", "stop") })
	f := filepath.Join(t.TempDir(), "s1.json")
	os.WriteFile(f, []byte(`{"schema_version":1,"session_id":"s1","messages":[{"role":"user","content":"hi"}]}`), 0o600)
	if out, errs, code := cli(t, ws, "", "import", f); code != 0 {
		t.Fatalf("import: %d %q %q", code, out, errs)
	}
	sub := filepath.Join(ws, "src", "pkg")
	if err := os.MkdirAll(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	if out, errs, code := cli(t, sub, "", "ls"); code != 0 || !strings.Contains(out, "s1") {
		t.Fatalf("ls in a subfolder: %d %q %q", code, out, errs)
	}
	if got := entries(t, filepath.Join(ws, "src")); strings.Join(got, ",") != "pkg" {
		t.Fatalf("ls in a subfolder made %v", got)
	}
}

// TestDiscoveryGitRoot: below a repository root without .cairn, cairn
// import makes the workspace at the root, and later commands find it.
func TestDiscoveryGitRoot(t *testing.T) {
	repo := t.TempDir()
	os.Mkdir(filepath.Join(repo, ".git"), 0o755)
	sub := filepath.Join(repo, "a")
	os.Mkdir(sub, 0o755)
	if _, _, code := cli(t, sub, "", "ls"); code != 3 {
		t.Fatalf("ls in a repository without a workspace: %d, want 3", code)
	}
	t.Cleanup(func() { cli(t, repo, "", "daemon", "stop") })
	f := filepath.Join(t.TempDir(), "s1.json")
	os.WriteFile(f, []byte(`{"schema_version":1,"session_id":"s1","messages":[]}`), 0o600)
	if out, errs, code := cli(t, sub, "", "import", f); code != 0 {
		t.Fatalf("import: %d %q %q", code, out, errs)
	}
	if _, err := os.Stat(filepath.Join(repo, ".cairn")); err != nil {
		t.Fatalf("import below the repository root: %v", err)
	}
	if _, err := os.Stat(filepath.Join(sub, ".cairn")); err == nil {
		t.Fatal("import made .cairn in the subfolder, not at the repository root")
	}
}

// TestOutsideWorkspace: commands that read say there is no workspace and
// make nothing (no .cairn, no daemon); --json says it as an object; cairn
// init then makes one.
func TestOutsideWorkspace(t *testing.T) {
	dir := t.TempDir()
	if !strings.HasPrefix(dir, os.TempDir()) {
		t.Skip("temp dir not under", os.TempDir())
	}
	for _, args := range [][]string{
		{"ls"}, {"show", "s1"}, {"runs", "s1"}, {"resume", "s1"}, {"messages", "s1"},
		{"artifacts", "s1"}, {"export", "s1"}, {"handoff", "s1"}, {"verify"}, {"daemon", "status"},
		{"daemon", "stop"}, {"rm", "s1"},
	} {
		out, errs, code := cli(t, dir, "", args...)
		if code != 3 || !strings.Contains(errs, "not in a cairn workspace") || strings.Contains(errs, "protocol.") {
			t.Errorf("%v: %d %q %q, want 3 and \"not in a cairn workspace\"", args, code, out, errs)
		}
		out, _, code = cli(t, dir, "", append(args, "--json")...)
		var obj struct{ Code, Message string }
		if code != 3 || json.Unmarshal([]byte(out), &obj) != nil || obj.Code != "no_workspace" || obj.Message == "" {
			t.Errorf("%v --json: %d %q", args, code, out)
		}
	}
	if out, _, code := cli(t, dir, "", "version"); code != 0 || !strings.Contains(out, "cairn ") {
		t.Errorf("version outside a workspace: %d %q", code, out)
	}
	if got := entries(t, dir); len(got) != 0 {
		t.Fatalf("read-only commands made %v", got)
	}
	if out, errs, code := cli(t, dir, "", "init"); code != 0 || !strings.Contains(out, "made a cairn workspace") {
		t.Fatalf("init: %d %q %q", code, out, errs)
	}
	t.Cleanup(func() { cli(t, dir, "", "daemon", "stop") })
	if out, errs, code := cli(t, dir, "", "ls"); code != 0 || !strings.Contains(out, "no sessions") {
		t.Fatalf("ls after init: %d %q %q", code, out, errs)
	}
}
