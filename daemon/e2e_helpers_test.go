package daemon_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/protocol"
)

// bins holds the cairnd and cairn binaries built once by TestMain.
var bins struct {
	dir, cairnd, cairn string
}

func TestMain(m *testing.M) {
	os.Exit(runMain(m))
}

func runMain(m *testing.M) int {
	if sock := os.Getenv("CAIRN_ECHO_SOCKET"); sock != "" {
		return echoServer(sock, os.Getenv("CAIRN_ECHO_LOG")) // the child of startEcho
	}
	dir, err := os.MkdirTemp("", "cairn-e2e-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	// 0755 so the peer-uid test can run the CLI as another user.
	if err := os.Chmod(dir, 0o755); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	bins.dir = dir
	bins.cairnd = filepath.Join(dir, "cairnd")
	bins.cairn = filepath.Join(dir, "cairn")
	build := exec.Command("go", "build", "-o", dir+"/", "github.com/cairn-dev/cairn/cmd/cairnd", "github.com/cairn-dev/cairn/cmd/cairn")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building cairnd and cairn:", err)
		return 1
	}
	os.Setenv(protocol.DaemonEnv, bins.cairnd)
	return m.Run()
}

// proc is a cairnd started by a test.
type proc struct {
	cmd  *exec.Cmd
	ws   string
	sock string
	log  string
	done chan struct{}
	err  error
}

// startCairnd starts cairnd on ws with args and waits until it answers.
// The process is killed and reaped at cleanup.
func startCairnd(t testing.TB, ws string, args ...string) *proc {
	t.Helper()
	p := spawnCairnd(t, ws, args...)
	waitReady(t, p)
	return p
}

// spawnCairnd starts cairnd without waiting for it.
func spawnCairnd(t testing.TB, ws string, args ...string) *proc {
	t.Helper()
	return spawnCommand(t, ws, bins.cairnd, append([]string{"--workspace", ws, "--log-level", "debug"}, args...)...)
}

// spawnCommand starts name with args as the cairnd serving ws (a command
// that execs cairnd, so that its pid is cairnd's), without waiting for it.
func spawnCommand(t testing.TB, ws, name string, args ...string) *proc {
	t.Helper()
	logf, err := os.CreateTemp(t.TempDir(), "cairnd-*.log")
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	cmd := exec.Command(name, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &proc{cmd: cmd, ws: ws, log: logf.Name(), done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		p.cmd.Process.Kill()
		<-p.done
	})
	return p
}

func waitReady(t testing.TB, p *proc) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		ws, _ := protocol.Workspace(p.ws)
		sock, err := protocol.SocketPath(ws)
		if err == nil {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			c, derr := protocol.Dial(ctx, sock, nil)
			cancel()
			if derr == nil {
				c.Close()
				p.sock = sock
				return
			}
			err = derr
		}
		select {
		case <-p.done:
			t.Fatalf("cairnd exited before answering (%v); log:\n%s", p.err, p.logText())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("cairnd did not answer within 10s: %v; log:\n%s", err, p.logText())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (p *proc) logText() string {
	b, _ := os.ReadFile(p.log)
	return string(b)
}

// wait waits for the process to exit and returns its exit code.
func (p *proc) wait(t *testing.T, within time.Duration) int {
	t.Helper()
	select {
	case <-p.done:
	case <-time.After(within):
		t.Fatalf("cairnd still running after %v", within)
	}
	var ee *exec.ExitError
	if errors.As(p.err, &ee) {
		return ee.ExitCode()
	}
	return 0
}

// dial connects to p without auto-start.
func (p *proc) dial(t testing.TB) *protocol.Client { return dialSocket(t, p.sock) }

// dialSocket connects a client to sock within 5 s and closes it when the
// test ends.
func dialSocket(t testing.TB, sock string) *protocol.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := protocol.Dial(ctx, sock, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// killPID kills a daemon the test did not start itself (one auto-started
// by a client; the client's goroutine reaps it) and waits for it to go.
func killPID(t *testing.T, pid int) {
	t.Helper()
	if pid <= 0 {
		return
	}
	syscall.Kill(pid, syscall.SIGKILL)
	deadline := time.Now().Add(10 * time.Second)
	for !gone(pid) {
		if time.Now().After(deadline) {
			t.Errorf("pid %d still there 10s after SIGKILL", pid)
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// gone reports whether pid has exited and been reaped.
func gone(pid int) bool {
	return errors.Is(syscall.Kill(pid, 0), syscall.ESRCH)
}

// daemonPIDs lists the cairnd processes serving ws (by command line).
func daemonPIDs(ws string) []int {
	var pids []int
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		var pid int
		if _, err := fmt.Sscanf(e.Name(), "%d", &pid); err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		args := strings.Split(string(b), "\x00")
		if len(args) > 2 && filepath.Base(args[0]) == "cairnd" && strings.Contains(string(b), ws) {
			stat, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
			if i := strings.LastIndexByte(string(stat), ')'); i > 0 && i+2 < len(stat) && stat[i+2] == 'Z' {
				continue
			}
			pids = append(pids, pid)
		}
	}
	return pids
}

// workspace returns a fresh canonical workspace directory.
func workspace(t testing.TB) string {
	t.Helper()
	ws, err := protocol.Workspace(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return ws
}
