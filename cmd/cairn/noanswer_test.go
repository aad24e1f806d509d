package main_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/cairn-dev/cairn/internal/proc"
	"github.com/cairn-dev/cairn/internal/testkit"
)

// TestCLIDaemonNotAnswering: a cairnd stopped with SIGSTOP holds the
// workspace and takes connections without answering them. daemon status
// and ls fail after their 5 s wait, naming its pid, that it is stopped and
// what to do (under --json too, code unavailable), instead of hanging;
// daemon stop ends it; the next command starts a new daemon.
func TestCLIDaemonNotAnswering(t *testing.T) {
	ws := newWorkspace(t)
	t.Cleanup(func() { cli(t, ws, "", "daemon", "stop") })
	if _, errs, code := cli(t, ws, "", "daemon", "start"); code != 0 {
		t.Fatalf("daemon start: %d %s", code, errs)
	}
	out, _, _ := cli(t, ws, "", "daemon", "status", "--json")
	var st struct{ PID int }
	if err := json.Unmarshal([]byte(out), &st); err != nil || st.PID <= 0 {
		t.Fatalf("daemon status --json: %q (%v)", out, err)
	}
	pid := st.PID
	testkit.Stop(t, pid)

	want := []string{
		fmt.Sprintf("cairnd (pid %d) did not answer the connection within 5s: it is stopped", pid),
		fmt.Sprintf("`kill -CONT %d` resumes it", pid),
	}
	has := func(what, s string) {
		t.Helper()
		for _, w := range want {
			if !strings.Contains(s, w) {
				t.Fatalf("%s on a stopped daemon: %q, want %q", what, s, w)
			}
		}
	}
	_, errs, code := cli(t, ws, "", "daemon", "status")
	if code != 1 {
		t.Fatalf("daemon status on a stopped daemon: exit %d, want 1", code)
	}
	has("daemon status", errs)
	out, _, code = cli(t, ws, "", "--json", "ls")
	var e struct{ Code, Message string }
	if err := json.Unmarshal([]byte(out), &e); err != nil || code != 1 || e.Code != "unavailable" {
		t.Fatalf("--json ls on a stopped daemon: exit %d, %q (%v), want code unavailable", code, out, err)
	}
	has("--json ls", e.Message)

	out, errs, code = cli(t, ws, "", "daemon", "stop")
	if code != 0 || !strings.Contains(out, fmt.Sprintf("cairnd (pid %d) did not answer within 5s; stopped it with SIGTERM", pid)) {
		t.Fatalf("daemon stop of a stopped daemon: exit %d, %q %q", code, out, errs)
	}
	if !proc.Gone(pid) {
		t.Fatalf("cairnd pid %d still runs after daemon stop", pid)
	}
	if out, errs, code := cli(t, ws, "", "ls"); code != 0 {
		t.Fatalf("ls after the stopped daemon was ended: exit %d, %q %q", code, out, errs)
	}
}
