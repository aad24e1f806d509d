package protocol_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/api"
	"github.com/cairn-dev/cairn/fsstore"
	"github.com/cairn-dev/cairn/internal/layout"
	"github.com/cairn-dev/cairn/internal/testkit"
	"github.com/cairn-dev/cairn/protocol"
	"github.com/cairn-dev/cairn/session"
)

var (
	cairndOnce sync.Once
	cairndPath string
	cairndErr  error
)

// cairnd builds cairnd once per test binary, into a directory TestMain
// removes.
func cairnd(t *testing.T) string {
	t.Helper()
	cairndOnce.Do(func() {
		dir, err := os.MkdirTemp("", "cairnd-bin-")
		if err != nil {
			cairndErr = err
			return
		}
		cairndPath = filepath.Join(dir, "cairnd")
		out, err := exec.Command("go", "build", "-o", cairndPath, "github.com/cairn-dev/cairn/cmd/cairnd").CombinedOutput()
		if err != nil {
			cairndErr = fmt.Errorf("building cairnd: %v\n%s", err, out)
		}
	})
	if cairndErr != nil {
		t.Fatal(cairndErr)
	}
	return cairndPath
}

func TestMain(m *testing.M) {
	if ws := os.Getenv(holderEnv); ws != "" {
		os.Exit(holdEmbedded(ws))
	}
	if spec := os.Getenv(runChildEnv); spec != "" {
		os.Exit(runChild(spec))
	}
	code := m.Run()
	if cairndPath != "" {
		os.RemoveAll(filepath.Dir(cairndPath))
	}
	os.Exit(code)
}

// holderEnv makes the test binary a process that holds a workspace's store
// in embedded mode (see holdEmbedded).
const holderEnv = "CAIRN_TEST_HOLD_EMBEDDED"

// holdEmbedded opens ws's store as an embedded libcairn user does, prints
// "held", and then obeys its standard input: "close" closes the store (the
// process lives on) and prints "closed"; end of input exits.
func holdEmbedded(ws string) int {
	st, err := fsstore.Open(ws, fsstore.Options{})
	if err != nil {
		fmt.Println("error:", err)
		return 1
	}
	fmt.Println("held")
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		if in.Text() == "close" && st != nil {
			st.Close()
			st = nil
			fmt.Println("closed")
		}
	}
	if st != nil {
		st.Close()
	}
	return 0
}

// embeddedHolder starts a process holding ws in embedded mode. It returns
// the process, a function that sends it a line and waits for its answer,
// and is stopped (its standard input closed, then reaped) at cleanup.
func embeddedHolder(t *testing.T, ws string) (*exec.Cmd, func(cmd, want string)) {
	t.Helper()
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), holderEnv+"="+ws)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		stdin.Close()
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	})
	out := bufio.NewScanner(stdout)
	expect := func(want string) {
		t.Helper()
		lines := make(chan string, 1)
		go func() {
			out.Scan()
			lines <- out.Text()
		}()
		select {
		case got := <-lines:
			if got != want {
				t.Fatalf("holder said %q, want %q", got, want)
			}
		case <-time.After(20 * time.Second):
			t.Fatalf("holder did not say %q", want)
		}
	}
	expect("held")
	return cmd, func(line, want string) {
		t.Helper()
		if _, err := io.WriteString(stdin, line+"\n"); err != nil {
			t.Fatal(err)
		}
		expect(want)
	}
}

// stopDaemon kills an auto-started daemon (this process's child, reaped by
// the client's goroutine) and waits for it to be gone.
func stopDaemon(t *testing.T, pid int) {
	t.Helper()
	if pid <= 0 {
		return
	}
	_ = syscall.Kill(pid, syscall.SIGKILL)
	for deadline := time.Now().Add(10 * time.Second); !errors.Is(syscall.Kill(pid, 0), syscall.ESRCH); {
		if time.Now().After(deadline) {
			t.Errorf("pid %d still there 10s after SIGKILL", pid)
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func newWorkspace(t *testing.T) string {
	t.Helper()
	ws, err := protocol.Workspace(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return ws
}

// TestConnectEmbeddedHolder: when a live process that is not a cairnd holds
// the workspace's store (embedded mode), a daemon-mode Connect fails at
// once with code locked and the holder's pid, without starting a daemon.
// The old client started one, which exited, and waited out StartTimeout
// (here 30 s) before failing with "nothing answered"; the bound asserted
// is the default 5 s wait, not a measured speed. Once the holder closes
// the store (and lives on, its pid still in LOCK), Connect starts a daemon.
func TestConnectEmbeddedHolder(t *testing.T) {
	ws := newWorkspace(t)
	holder, send := embeddedHolder(t, ws)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	opts := &protocol.Options{DaemonPath: cairnd(t), DaemonArgs: []string{"--no-track-files"}, StartTimeout: 30 * time.Second}

	start := time.Now()
	c, err := protocol.Connect(ctx, ws, opts)
	took := time.Since(start)
	if err == nil {
		stopDaemon(t, c.Hello().PID)
		t.Fatal("Connect succeeded while an embedded process holds the workspace")
	}
	var le *session.LockedError
	if !errors.As(err, &le) || le.PID != holder.Process.Pid || protocol.CodeOf(err) != session.CodeLocked {
		t.Fatalf("Connect: %v (code %s), want a locked error naming pid %d", err, protocol.CodeOf(err), holder.Process.Pid)
	}
	if want := fmt.Sprintf("pid %d", holder.Process.Pid); !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "embedded mode") {
		t.Fatalf("Connect: %v, want it to name %s and embedded mode", err, want)
	}
	if took >= protocol.DefaultStartTimeout {
		t.Fatalf("Connect took %v to fail, not less than the %v a started daemon gets", took, protocol.DefaultStartTimeout)
	}
	if _, err := os.Stat(layout.DaemonLog(ws)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a daemon was started (its log: %v)", err)
	}
	t.Logf("failed in %v: %v", took, err)

	send("close", "closed")
	c, err = protocol.Connect(ctx, ws, opts)
	if err != nil {
		t.Fatalf("Connect after the holder closed the store (pid %d lives on): %v", holder.Process.Pid, err)
	}
	defer c.Close()
	t.Cleanup(func() { stopDaemon(t, c.Hello().PID) })
	if _, err := c.Status(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestConnectReportsEarlyExit: a started daemon that exits at once for a
// reason other than a taken workspace fails Connect at once with what it
// said (the last line of its log), rather than only its status.
func TestConnectReportsEarlyExit(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err := protocol.Connect(ctx, newWorkspace(t), &protocol.Options{
		DaemonPath: cairnd(t), DaemonArgs: []string{"--log-level=nonsense"}, StartTimeout: time.Hour})
	if err == nil || !strings.Contains(err.Error(), `unknown log level "nonsense"`) || protocol.CodeOf(err) != api.CodeUnavailable {
		t.Fatalf("Connect with a daemon that cannot start: %v (code %s), want its last log line and unavailable", err, protocol.CodeOf(err))
	}
}

// TestConnectHandshakeDies: a daemon killed while a client connects cuts
// the handshake ("failed to send handshake request: EOF"). The client
// dials again; once the socket is gone it starts a daemon and the call
// succeeds. While the socket keeps cutting handshakes, Connect fails with
// unavailable after StartTimeout. The dying daemon is a listener that cuts
// every handshake, so the race is the same every run.
func TestConnectHandshakeDies(t *testing.T) {
	bin := cairnd(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	t.Run("next call restarts the daemon", func(t *testing.T) {
		ws := newWorkspace(t)
		c, err := protocol.Connect(ctx, ws, &protocol.Options{DaemonPath: bin, DaemonArgs: []string{"--no-track-files"}})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		first := c.Hello().PID
		t.Cleanup(func() { stopDaemon(t, c.Hello().PID) })
		if _, err := c.Save(ctx, api.SaveRequest{SessionID: "s", Change: &session.Change{AppendMessages: []session.Value{session.Value(`"before"`)}}}); err != nil {
			t.Fatal(err)
		}
		stopDaemon(t, first)
		select {
		case <-protocol.ConnDead(c):
		case <-ctx.Done():
			t.Fatal("the client did not notice its daemon was killed")
		}
		cut := testkit.DyingDaemon(t, c.Socket(), 3)

		rs, err := c.ResumeSession(ctx, "s")
		if err != nil {
			t.Fatalf("the call after the daemon died during the handshake: %v (code %s)", err, protocol.CodeOf(err))
		}
		if got := c.Hello().PID; got == first || got == 0 {
			t.Fatalf("no new daemon: pid %d, the killed one was %d", got, first)
		}
		if cut.Load() != 3 {
			t.Fatalf("%d handshakes cut, want 3", cut.Load())
		}
		if len(rs.Snapshot.Messages) != 1 {
			t.Fatalf("%d messages after the restart, want 1", len(rs.Snapshot.Messages))
		}
	})

	for _, noAutoStart := range []bool{false, true} {
		t.Run(fmt.Sprintf("still dying is unavailable/no_auto_start=%v", noAutoStart), func(t *testing.T) {
			ws := newWorkspace(t)
			if err := os.MkdirAll(layout.StateDir(ws), 0o700); err != nil {
				t.Fatal(err)
			}
			cut := testkit.DyingDaemon(t, layout.Socket(ws), -1)
			_, err := protocol.Connect(ctx, ws, &protocol.Options{DaemonPath: bin, NoAutoStart: noAutoStart, StartTimeout: 300 * time.Millisecond})
			if err == nil || !errors.Is(err, protocol.ErrUnavailable) || protocol.CodeOf(err) != api.CodeUnavailable {
				t.Fatalf("Connect to a daemon that cuts every handshake: %v (code %s), want unavailable", err, protocol.CodeOf(err))
			}
			if cut.Load() < 2 {
				t.Fatalf("%d handshakes tried, want retries", cut.Load())
			}
		})
	}
}

// TestConnectFullBacklog: a socket whose listener accepts nothing and
// whose backlog is full refuses a connect with EAGAIN. Connect takes that
// for a daemon not keeping up: it dials again until StartTimeout and then
// fails with unavailable (which a host retries), not internal, and starts
// no daemon.
func TestConnectFullBacklog(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("EAGAIN for a full backlog is Linux's; BSDs and macOS refuse the connect (ECONNREFUSED)")
	}
	ws := newWorkspace(t)
	if err := os.MkdirAll(layout.StateDir(ws), 0o700); err != nil {
		t.Fatal(err)
	}
	sock := layout.Socket(ws)
	fd, err := syscall.Socket(syscall.AF_UNIX, syscall.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(fd)
	if err := syscall.Bind(fd, &syscall.SockaddrUnix{Name: sock}); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Listen(fd, 0); err != nil {
		t.Fatal(err)
	}
	// Fill the backlog: connects succeed until it is full.
	var filled bool
	for i := 0; i < 64 && !filled; i++ {
		c, err := net.Dial("unix", sock)
		if errors.Is(err, syscall.EAGAIN) {
			filled = true
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
	}
	if !filled {
		t.Fatal("64 connects to a backlog of 0, none refused")
	}
	ctx := testkit.Context(t)
	start := time.Now()
	_, err = protocol.Connect(ctx, ws, &protocol.Options{DaemonPath: "/nonexistent/cairnd", StartTimeout: 300 * time.Millisecond})
	if !errors.Is(err, protocol.ErrUnavailable) || protocol.CodeOf(err) != api.CodeUnavailable || !strings.Contains(err.Error(), "listen backlog is full") {
		t.Fatalf("Connect to a full backlog: %v (code %s), want unavailable", err, protocol.CodeOf(err))
	}
	if took := time.Since(start); took < 300*time.Millisecond {
		t.Fatalf("Connect gave up after %v, before its StartTimeout", took)
	}
}

// TestConnectRotatesDaemonLog: starting a daemon rotates a cairnd.log
// larger than DaemonLogMaxBytes to cairnd.log.1 (replacing the old one);
// one at the limit is appended to.
func TestConnectRotatesDaemonLog(t *testing.T) {
	bin := cairnd(t)
	for _, tc := range []struct {
		name    string
		size    int
		rotated bool
	}{
		{"over the limit", protocol.DaemonLogMaxBytes + 1, true},
		{"at the limit", protocol.DaemonLogMaxBytes, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ws := newWorkspace(t)
			if err := os.MkdirAll(layout.StateDir(ws), 0o700); err != nil {
				t.Fatal(err)
			}
			logPath := layout.DaemonLog(ws)
			old := bytes.Repeat([]byte("x"), tc.size)
			if err := os.WriteFile(logPath, old, 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(logPath+".1", []byte("older\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			c, err := protocol.Connect(ctx, ws, &protocol.Options{DaemonPath: bin, DaemonArgs: []string{"--no-track-files"}})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			t.Cleanup(func() { stopDaemon(t, c.Hello().PID) })

			cur, err := os.ReadFile(logPath)
			if err != nil {
				t.Fatal(err)
			}
			kept, err := os.ReadFile(logPath + ".1")
			if err != nil {
				t.Fatal(err)
			}
			if tc.rotated {
				if !bytes.Equal(kept, old) || bytes.HasPrefix(cur, []byte("x")) {
					t.Fatalf("not rotated: cairnd.log.1 is %d bytes, cairnd.log %d bytes starting %q", len(kept), len(cur), cur[:min(len(cur), 8)])
				}
			} else if string(kept) != "older\n" || !bytes.HasPrefix(cur, old) {
				t.Fatalf("rotated at the limit: cairnd.log.1 is %d bytes, cairnd.log %d", len(kept), len(cur))
			}
		})
	}
}
