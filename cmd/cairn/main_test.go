package main_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/internal/proc"
)

var bin struct{ cairn, cairnd string }

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "cairn-cli-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	bin.cairn, bin.cairnd = filepath.Join(dir, "cairn"), filepath.Join(dir, "cairnd")
	build := exec.Command("go", "build", "-o", dir+"/", "github.com/cairn-dev/cairn/cmd/cairnd", "github.com/cairn-dev/cairn/cmd/cairn")
	build.Stderr = os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "build:", err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// cli runs cairn in ws and returns stdout, stderr and the exit code. The
// daemon is found next to the cairn binary (CAIRN_DAEMON unset).
func cli(t *testing.T, ws string, stdin string, args ...string) (string, string, int) {
	t.Helper()
	return cliEnv(t, ws, stdin, nil, args...)
}

// cliLimit bounds one cairn command in the tests: one that waits longer
// (on a daemon that does not answer, say) is killed and fails the test.
const cliLimit = 2 * time.Minute

// cliEnv is cli with extra environment variables.
func cliEnv(t *testing.T, ws, stdin string, env []string, args ...string) (string, string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), cliLimit)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin.cairn, args...)
	cmd.Dir = ws
	cmd.Env = append(append(os.Environ(), "CAIRN_DAEMON="), env...)
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("cairn %v: still running after %v (killed)\nstderr: %s", args, cliLimit, errb.String())
	}
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return out.String(), errb.String(), code
}

func TestCLI(t *testing.T) {
	ws := newWorkspace(t)
	t.Cleanup(func() { cli(t, ws, "", "daemon", "stop") })

	// Before any daemon: status says not running (3); version still works.
	if _, errs, code := cli(t, ws, "", "daemon", "status"); code != 3 || !strings.Contains(errs, "not running") {
		t.Fatalf("status without daemon: %d %q", code, errs)
	}
	if out, _, code := cli(t, ws, "", "version"); code != 0 || !strings.Contains(out, "cairn ") {
		t.Fatalf("version: %d %q", code, out)
	}
	// Usage errors: 2.
	for _, args := range [][]string{{}, {"bogus"}, {"show"}, {"show", "a", "b"}, {"daemon"}, {"daemon", "restart"}, {"ls", "--nope"}} {
		if _, _, code := cli(t, ws, "", args...); code != 2 {
			t.Fatalf("%v: exit %d, want 2", args, code)
		}
	}
	if out, _, code := cli(t, ws, "", "--help"); code != 0 || !strings.Contains(out, "exit status:") {
		t.Fatalf("--help: %d", code)
	}

	// ls auto-starts the daemon.
	if out, _, code := cli(t, ws, "", "ls"); code != 0 || !strings.Contains(out, "no sessions") {
		t.Fatalf("ls: %d %q", code, out)
	}
	out, _, code := cli(t, ws, "", "daemon", "status", "--json")
	var st struct {
		PID   int    `json:"pid"`
		State string `json:"state"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &st) != nil || st.PID == 0 || st.State != "serving" {
		t.Fatalf("daemon status --json: %d %q", code, out)
	}

	// import, ls, show, runs, resume, export, rm.
	env := `{"schema_version":1,"session_id":"s1","messages":[{"role":"user","content":"hi"}],
		"runs":[{"run_id":"r1","status":"running","started_at":"2026-01-01T00:00:00Z","usage":{"input_tokens":1,"output_tokens":2,"total_tokens":3,"cost":0},"tool_calls_count":1}],
		"handoff":{"done":["parser"],"risks":["flaky test"],"next_step":{"task":"wire the CLI","done_when":"tests pass"}}}`
	f := filepath.Join(t.TempDir(), "s1.json")
	os.WriteFile(f, []byte(env), 0o600)
	if out, errs, code := cli(t, ws, "", "import", f); code != 0 || !strings.Contains(out, "imported s1") {
		t.Fatalf("import: %d %q %q", code, out, errs)
	}
	if out, _, code := cli(t, ws, env, "import", "-"); code != 1 {
		t.Fatalf("import of an existing id: %d %q, want 1 (conflict)", code, out)
	}
	if out, _, code := cli(t, ws, "", "ls"); code != 0 || !strings.Contains(out, "s1") || !strings.Contains(out, "1 running") {
		t.Fatalf("ls: %d %q", code, out)
	}
	out, _, code = cli(t, ws, "", "ls", "--json")
	var ls struct {
		Sessions []struct {
			SessionID string `json:"session_id"`
		} `json:"sessions"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &ls) != nil || len(ls.Sessions) != 1 {
		t.Fatalf("ls --json: %d %q", code, out)
	}
	if out, _, code := cli(t, ws, "", "show", "s1"); code != 0 || !strings.Contains(out, "messages") || !strings.Contains(out, "wire the CLI") {
		t.Fatalf("show: %d %q", code, out)
	}
	if out, _, code := cli(t, ws, "", "--json", "show", "s1"); code != 0 || !json.Valid([]byte(out)) || !strings.Contains(out, `"content": "hi"`) {
		t.Fatalf("show --json: %d %q", code, out)
	}
	if out, _, code := cli(t, ws, "", "runs", "s1"); code != 0 || !strings.Contains(out, "r1") || !strings.Contains(out, "running") {
		t.Fatalf("runs: %d %q", code, out)
	}
	if out, _, code := cli(t, ws, "", "resume", "s1"); code != 0 || !strings.Contains(out, "next step: wire the CLI") || !strings.Contains(out, "flaky test") {
		t.Fatalf("resume: %d %q", code, out)
	}
	if out, _, code := cli(t, ws, "", "resume", "s1", "--json"); code != 0 || !strings.Contains(out, `"interrupted_runs"`) {
		t.Fatalf("resume --json: %d %q", code, out)
	}
	exported, _, code := cli(t, ws, "", "export", "s1")
	if code != 0 || !json.Valid([]byte(exported)) {
		t.Fatalf("export: %d %q", code, exported)
	}
	// -o: cairnd writes the same envelope to the file, as it reads.
	outFile := filepath.Join(t.TempDir(), "s1-export.json")
	if out, errs, code := cli(t, ws, "", "export", "s1", "-o", outFile); code != 0 || !strings.Contains(out, "exported s1") {
		t.Fatalf("export -o: %d %q %q", code, out, errs)
	}
	if b, err := os.ReadFile(outFile); err != nil || string(b)+"\n" != exported {
		t.Fatalf("export -o wrote %q (%v), export printed %q", b, err, exported)
	}
	if _, _, code := cli(t, ws, "", "ls", "-o", outFile); code != 2 {
		t.Fatalf("-o with ls: exit %d, want 2", code)
	}
	if out, _, code := cli(t, ws, "", "rm", "s1"); code != 0 || !strings.Contains(out, "deleted s1") {
		t.Fatalf("rm: %d %q", code, out)
	}
	// Not found: 3.
	for _, args := range [][]string{{"show", "s1"}, {"runs", "s1"}, {"resume", "s1"}, {"rm", "s1"}, {"export", "s1"}} {
		if _, errs, code := cli(t, ws, "", args...); code != 3 || !strings.Contains(errs, "not found") || strings.Contains(errs, "cairnd ") {
			t.Fatalf("%v: exit %d %q, want 3", args, code, errs)
		}
	}
	// The export imports back.
	if out, _, code := cli(t, ws, exported, "import", "-"); code != 0 || !strings.Contains(out, "imported s1") {
		t.Fatalf("re-import: %d %q", code, out)
	}
	if out, _, code := cli(t, ws, "", "rm", "s1"); code != 0 || !strings.Contains(out, "deleted s1") {
		t.Fatalf("rm: %d %q", code, out)
	}
	if out, errs, code := cli(t, ws, "", "import", outFile); code != 0 || !strings.Contains(out, "imported s1") {
		t.Fatalf("import of the -o file: %d %q %q", code, out, errs)
	}
	if _, _, code := cli(t, ws, "", "import", filepath.Join(ws, "missing.json")); code != 1 {
		t.Fatalf("import of a missing file: %d", code)
	}

	// daemon stop waits for the exit; daemon start brings it back.
	if out, _, code := cli(t, ws, "", "daemon", "stop"); code != 0 || !strings.Contains(out, "stopped") {
		t.Fatalf("daemon stop: %d %q", code, out)
	}
	if !gone(st.PID) {
		t.Fatalf("pid %d still alive after daemon stop", st.PID)
	}
	if out, _, code := cli(t, ws, "", "daemon", "stop"); code != 0 || !strings.Contains(out, "not running") {
		t.Fatalf("second daemon stop: %d %q", code, out)
	}
	if out, _, code := cli(t, ws, "", "daemon", "start"); code != 0 || !strings.Contains(out, "running (pid") {
		t.Fatalf("daemon start: %d %q", code, out)
	}
	if out, _, code := cli(t, ws, "", "daemon", "stop"); code != 0 || !strings.Contains(out, "stopped") {
		t.Fatalf("daemon stop: %d %q", code, out)
	}
}

// gone waits up to 5 s for pid to exit (a zombie counts: the daemon was
// started by a cairn process that has exited, so init reaps it).
func gone(pid int) bool {
	deadline := time.Now().Add(5 * time.Second)
	for !proc.Gone(pid) {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(10 * time.Millisecond)
	}
	return true
}
