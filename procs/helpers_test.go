package procs

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/api"
	"github.com/cairn-dev/cairn/internal/proc"
	"github.com/cairn-dev/cairn/session"
)

// testExe returns the test binary, which doubles as the child programs.
func testExe(t *testing.T) string {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return exe
}

// freePort returns a loopback port that was free a moment ago. Another
// process could take it before the test binds it; that race is accepted.
func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// serverProcess records the child HTTP server on a free loopback port as a
// runtime process with a URL health check.
func serverProcess(t *testing.T, name string, extra ...string) session.Process {
	t.Helper()
	port := freePort(t)
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	return session.Process{
		Name:        name,
		Command:     append([]string{testExe(t), childArg, "serve", addr}, extra...),
		Cwd:         t.TempDir(),
		Port:        port,
		HealthCheck: &session.HealthCheck{URL: "http://" + addr + "/healthz"},
	}
}

// startDirect starts p the way an agent did before the session was saved
// (not through Restart), and kills and reaps its group at cleanup.
func startDirect(t *testing.T, p session.Process) (pid int, stop func()) {
	t.Helper()
	cmd := exec.Command(p.Command[0], p.Command[1:]...)
	cmd.Dir = p.Cwd
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	pid = cmd.Process.Pid
	stopped := false
	stop = func() {
		if stopped {
			return
		}
		stopped = true
		syscall.Kill(-pid, syscall.SIGKILL)
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Errorf("pid %d not reaped 10s after SIGKILL", pid)
		}
	}
	t.Cleanup(stop)
	return pid, stop
}

// reapOnCleanup kills the group a Restart started and waits until the
// package's waiter has reaped its leader.
func reapOnCleanup(t *testing.T, pid int) {
	t.Helper()
	if pid <= 0 {
		return
	}
	t.Cleanup(func() {
		syscall.Kill(-pid, syscall.SIGKILL)
		if !waitGone(pid, 10*time.Second) {
			t.Errorf("pid %d still exists 10s after SIGKILL", pid)
		}
	})
}

// waitGone polls until pid is gone, up to within.
func waitGone(pid int, within time.Duration) bool {
	deadline := time.Now().Add(within)
	for !proc.Gone(pid) {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(10 * time.Millisecond)
	}
	return true
}

// waitState probes p until it reports want, up to within (the process may
// need a moment to bind or to die).
func waitState(t *testing.T, p session.Process, want string, within time.Duration) api.ProcessState {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		st := ProbeProcess(t.Context(), p, time.Second)
		if st.State == want || time.Now().After(deadline) {
			return st
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func readPID(t *testing.T, path string, within time.Duration) int {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		b, err := os.ReadFile(path)
		if err == nil && len(b) > 0 {
			pid, err := strconv.Atoi(string(b))
			if err != nil {
				t.Fatal(err)
			}
			return pid
		}
		if time.Now().After(deadline) {
			t.Fatalf("no pid in %s", path)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func logDir(t *testing.T) string { return filepath.Join(t.TempDir(), ".cairn", "logs") }

// procGroups reads the process group and session of pid from /proc.
func procGroups(t *testing.T, pid int) (pgrp, sid int) {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Skipf("no /proc: %v", err)
	}
	s := string(b)
	// After "(comm) ": state ppid pgrp session ...
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	pgrp, _ = strconv.Atoi(f[2])
	sid, _ = strconv.Atoi(f[3])
	return pgrp, sid
}
