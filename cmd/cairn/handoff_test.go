package main_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/api"
	"github.com/cairn-dev/cairn/protocol"
	"github.com/cairn-dev/cairn/session"
)

// daemonClient starts (through auto-start) the workspace's daemon and
// returns a client; the daemon is stopped at cleanup.
func daemonClient(t *testing.T, ws string) *protocol.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	c, err := protocol.Connect(ctx, ws, &protocol.Options{DaemonPath: bin.cairnd})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c.Close()
		cli(t, ws, "", "daemon", "stop")
	})
	return c
}

func completeHandoff() *session.Snapshot {
	return &session.Snapshot{
		Messages: []session.Value{session.Value(`"hi"`)},
		Runs:     []session.Run{{RunID: "r1", Status: session.RunCompleted, Usage: session.Usage{TotalTokens: 10}, ToolCallsCount: 2}},
		Verifications: []session.Verification{{ID: "v1", RunID: "r1", Checks: []session.Check{
			{Name: "unit", Command: "go test ./...", Status: session.CheckPassed, Output: "ok"},
		}}},
		Handoff: &session.Handoff{
			Done:             []string{"added the parser"},
			Verified:         []string{"unit"},
			Restart:          &session.Restart{Workdir: ".", Commands: []string{"make run"}},
			ReviewedVersion:  &session.ReviewedVersion{VCS: "git", Commit: "0123abc"},
			Risks:            []string{"parser is slow on huge files"},
			DecisionsPending: []string{"keep the old format?"},
			NextStep:         &session.NextStep{Task: "benchmark the parser", DoneWhen: "make bench shows < 10 ms"},
		},
	}
}

func TestHandoffCLI(t *testing.T) {
	ctx := context.Background()
	ws := newWorkspace(t)
	c := daemonClient(t, ws)
	if _, err := c.Save(ctx, api.SaveRequest{SessionID: "done", Snapshot: completeHandoff()}); err != nil {
		t.Fatal(err)
	}
	out, _, code := cli(t, ws, "", "handoff", "done")
	if code != 0 || !strings.Contains(out, "benchmark the parser") || !strings.Contains(out, "go test ./...") {
		t.Fatalf("handoff: exit %d\n%s", code, out)
	}
	if out, _, code := cli(t, ws, "", "handoff", "done", "--check"); code != 0 || !strings.Contains(out, "complete") {
		t.Fatalf("--check of a complete handoff: exit %d %q", code, out)
	}
	if _, _, code := cli(t, ws, "", "handoff", "done", "--write"); code != 0 {
		t.Fatalf("--write: exit %d", code)
	}
	written, err := os.ReadFile(filepath.Join(ws, "HANDOFF.md"))
	if err != nil || string(written) != out {
		t.Fatalf("HANDOFF.md differs from what handoff printed (%v)", err)
	}

	// Each required part missing in turn: --check exits 1 and names it.
	for key, drop := range map[string]func(s *session.Snapshot){
		"result":           func(s *session.Snapshot) { s.Handoff.Done = nil },
		"verification":     func(s *session.Snapshot) { s.Verifications = nil; s.Handoff.Verified = nil },
		"restart_path":     func(s *session.Snapshot) { s.Handoff.Restart = nil },
		"reviewed_version": func(s *session.Snapshot) { s.Handoff.ReviewedVersion = nil },
		"risks_decisions":  func(s *session.Snapshot) { s.Handoff.Risks, s.Handoff.DecisionsPending = nil, nil },
		"next_step":        func(s *session.Snapshot) { s.Handoff.NextStep = nil },
	} {
		snap := completeHandoff()
		drop(snap)
		id := "missing-" + key
		if _, err := c.Save(ctx, api.SaveRequest{SessionID: id, Snapshot: snap}); err != nil {
			t.Fatal(err)
		}
		out, _, code := cli(t, ws, "", "handoff", id, "--check", "--json")
		var got struct {
			Complete bool
			Missing  []struct{ Key string }
		}
		if err := json.Unmarshal([]byte(out), &got); err != nil {
			t.Fatalf("%s: %v in %q", key, err, out)
		}
		if code != 1 || got.Complete || len(got.Missing) != 1 || got.Missing[0].Key != key {
			t.Fatalf("missing %s: exit %d, %+v", key, code, got)
		}
	}
	// A next step without its done condition is refused at save time.
	bad := completeHandoff()
	bad.Handoff.NextStep.DoneWhen = ""
	if _, err := c.Save(ctx, api.SaveRequest{SessionID: "bad", Snapshot: bad}); session.CodeOf(err) != session.CodeInvalidArgument {
		t.Fatalf("next step without done_when: %v", err)
	}
	if _, _, code := cli(t, ws, "", "handoff", "nope"); code != 3 {
		t.Fatalf("handoff of an unknown session: exit %d", code)
	}
	if _, _, code := cli(t, ws, "", "ls", "--write"); code != 2 {
		t.Fatalf("--write on ls: exit %d", code)
	}
}

func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

type restartResult struct {
	Outcome, State, Error string
	PID                   int
}

// TestRuntimeCLI records a tiny loopback HTTP server as a runtime process,
// sees it not running, restarts it through the CLI, sees it healthy (also
// on resume), checks a health check that never passes ends in a clear
// timeout with the started process gone, and that a secret in the
// environment reaches nothing under .cairn/.
func TestRuntimeCLI(t *testing.T) {
	python, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 (the test's tiny HTTP server) is not installed")
	}
	ctx := context.Background()
	ws := newWorkspace(t)
	c := daemonClient(t, ws)
	port, closed := freePort(t), freePort(t)
	const secret = "s3cr3t-value-4f9a"
	rt := &session.Runtime{
		Processes: []session.Process{
			{Name: "web", Command: []string{python, "-m", "http.server", fmt.Sprint(port), "--bind", "127.0.0.1"}, Cwd: ws,
				EnvKeys: []string{"CAIRN_TEST_SECRET"}, Port: port,
				HealthCheck: &session.HealthCheck{URL: fmt.Sprintf("http://127.0.0.1:%d/", port), ExpectStatus: 200}},
			{Name: "never", Command: []string{"sleep", "60"}, Cwd: ws,
				HealthCheck: &session.HealthCheck{URL: fmt.Sprintf("http://127.0.0.1:%d/", closed), ExpectStatus: 200}},
		},
		Previews: []session.Preview{{URL: fmt.Sprintf("http://127.0.0.1:%d/", port), Process: "web"}},
	}
	if _, err := c.Save(ctx, api.SaveRequest{SessionID: "s", Change: &session.Change{Runtime: rt}}); err != nil {
		t.Fatal(err)
	}
	state := func() string {
		t.Helper()
		out, _, code := cli(t, ws, "", "runtime", "s", "--json")
		var got struct {
			Processes []struct{ Name, State string }
		}
		if code != 0 || json.Unmarshal([]byte(out), &got) != nil {
			t.Fatalf("runtime --json: exit %d %q", code, out)
		}
		return got.Processes[0].State
	}
	if s := state(); s != "not_running" {
		t.Fatalf("before restart: %s", s)
	}
	out, errs, code := cliEnv(t, ws, "", []string{"CAIRN_TEST_SECRET=" + secret}, "runtime", "s", "--restart", "web", "--timeout", "20s", "--json")
	var res restartResult
	if json.Unmarshal([]byte(out), &res) != nil || code != 0 || res.Outcome != "started" || res.PID == 0 {
		t.Fatalf("restart web: exit %d %q %q", code, out, errs)
	}
	t.Cleanup(func() { syscall.Kill(-res.PID, syscall.SIGKILL) })
	if s := state(); s != "healthy" {
		t.Fatalf("after restart: %s", s)
	}
	r, err := c.ResumeSession(ctx, "s")
	if err != nil || len(r.Processes) != 2 || r.Processes[0].State != "healthy" || r.Processes[1].State != "not_running" {
		t.Fatalf("resume processes: %+v %v", r.Processes, err)
	}
	out, _, code = cli(t, ws, "", "runtime", "s", "--restart", "web")
	if code != 0 || !strings.Contains(out, "already healthy") {
		t.Fatalf("restart of a healthy process: exit %d %q", code, out)
	}

	out, errs, code = cli(t, ws, "", "runtime", "s", "--restart", "never", "--timeout", "1500ms", "--json")
	var failed restartResult
	_ = json.Unmarshal([]byte(out), &failed)
	if code != 1 || failed.Outcome != "failed" || !strings.Contains(errs, "did not pass in time") || strings.Contains(errs, "procs.") {
		t.Fatalf("never-healthy restart: exit %d %q %q", code, out, errs)
	}
	if failed.PID != 0 {
		if err := syscall.Kill(failed.PID, 0); !errors.Is(err, syscall.ESRCH) {
			t.Fatalf("the process started for a failed restart is still there (pid %d)", failed.PID)
		}
	}
	if _, _, code := cli(t, ws, "", "runtime", "s", "--restart", "nope"); code != 3 {
		t.Fatalf("restart of an unknown process: exit %d", code)
	}

	// Kill the server: not running again.
	syscall.Kill(-res.PID, syscall.SIGKILL)
	deadline := time.Now().Add(10 * time.Second)
	for state() != "not_running" {
		if time.Now().After(deadline) {
			t.Fatal("killed server still reported running")
		}
		time.Sleep(100 * time.Millisecond)
	}

	// The secret reached the server's environment, and nothing cairn keeps.
	err = filepath.Walk(filepath.Join(ws, ".cairn"), func(p string, fi os.FileInfo, err error) error {
		if err != nil || !fi.Mode().IsRegular() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if bytes.Contains(b, []byte(secret)) {
			return fmt.Errorf("%s holds the secret", p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
