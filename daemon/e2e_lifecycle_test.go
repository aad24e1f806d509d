package daemon_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/api"
	"github.com/cairn-dev/cairn/internal/testkit"
	"github.com/cairn-dev/cairn/protocol"
	"github.com/cairn-dev/cairn/session"
)

// TestE2EKill9DuringCommits: SIGKILL cairnd while a client streams
// commits; everything acknowledged survives; the client's next call
// auto-starts a new daemon and succeeds.
func TestE2EKill9DuringCommits(t *testing.T) {
	ws := workspace(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := protocol.Connect(ctx, ws, nil) // auto-starts cairnd
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	first := c.Hello().PID
	t.Cleanup(func() { killPID(t, first) })

	var acked []int
	stop := make(chan struct{})
	streamErr := make(chan error, 1)
	go func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				streamErr <- nil
				return
			default:
			}
			_, err := c.Save(ctx, api.SaveRequest{SessionID: "stream", Change: &session.Change{AppendMessages: []session.Value{session.Value(strconv.Itoa(i))}}})
			if err != nil {
				streamErr <- err
				return
			}
			acked = append(acked, i)
		}
	}()
	time.Sleep(300 * time.Millisecond)
	syscall.Kill(first, syscall.SIGKILL)
	killPID(t, first) // wait until it is gone
	// A kill that hits a call in flight fails it with ErrConnectionLost; one
	// that falls between two calls makes the next call reconnect, starting
	// a new daemon, and the stream goes on there.
	close(stop)
	switch err = <-streamErr; {
	case err == nil:
		t.Log("the kill fell between two calls; the stream reconnected")
	case errors.Is(err, protocol.ErrConnectionLost):
		t.Log("the kill hit a call in flight: ErrConnectionLost")
	default:
		t.Fatalf("stream ended with %v, want ErrConnectionLost or a reconnect", err)
	}
	if len(acked) == 0 {
		t.Fatal("nothing was acknowledged before the kill")
	}

	// The next call reconnects, starting a new daemon.
	rs, err := c.ResumeSession(ctx, "stream")
	if err != nil {
		t.Fatalf("call after the kill: %v", err)
	}
	second := c.Hello().PID
	t.Cleanup(func() { killPID(t, second) })
	if second == first || second == 0 {
		t.Fatalf("no new daemon: pid %d", second)
	}
	if len(rs.Snapshot.Messages) < len(acked) {
		t.Fatalf("%d commits acknowledged, %d messages after restart", len(acked), len(rs.Snapshot.Messages))
	}
	for i := range acked {
		if string(rs.Snapshot.Messages[i]) != strconv.Itoa(i) {
			t.Fatalf("message %d = %s", i, rs.Snapshot.Messages[i])
		}
	}
	t.Logf("%d acknowledged before SIGKILL, %d present after restart", len(acked), len(rs.Snapshot.Messages))

	// A Client without auto-start fails clearly instead.
	killPID(t, second)
	d, err := protocol.Connect(ctx, ws, &protocol.Options{NoAutoStart: true})
	if !errors.Is(err, protocol.ErrNoDaemon) {
		t.Fatalf("NoAutoStart connect with no daemon: %v %v", d, err)
	}
}

// TestE2EAutoStartAfterHolderExits: when the daemon Connect starts finds
// the workspace taken by a daemon on its way out (here a cairnd frozen
// with SIGSTOP, its socket gone, and killed 400 ms later) and exits,
// Connect starts another once the holder is gone, within its window. (A
// holder that is not a cairnd fails Connect at once instead:
// protocol.TestConnectEmbeddedHolder.)
func TestE2EAutoStartAfterHolderExits(t *testing.T) {
	ws := workspace(t)
	holder := startCairnd(t, ws, "--no-track-files")
	testkit.Stop(t, holder.cmd.Process.Pid)
	if err := os.Remove(holder.sock); err != nil {
		t.Fatal(err)
	}
	kill := time.AfterFunc(400*time.Millisecond, func() { _ = holder.cmd.Process.Kill() })
	t.Cleanup(func() { kill.Stop() })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := protocol.Connect(ctx, ws, nil)
	if err != nil {
		t.Fatalf("Connect after the holder let go: %v", err)
	}
	defer c.Close()
	t.Cleanup(func() { killPID(t, c.Hello().PID) })
	if _, err := c.Save(ctx, msg("after")); err != nil {
		t.Fatal(err)
	}
}

// TestE2EAutoStartDaemonFails: a started daemon that exits for another
// reason than a taken workspace fails Connect at once, naming its status,
// rather than waiting out its start timeout (here longer than the test's
// context: waiting it out would fail with the context's error instead).
func TestE2EAutoStartDaemonFails(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err := protocol.Connect(ctx, workspace(t), &protocol.Options{DaemonArgs: []string{"--log-level=nonsense"}, StartTimeout: time.Hour})
	if err == nil || !strings.Contains(err.Error(), "exit status 2") || !errors.Is(err, protocol.ErrNoDaemon) {
		t.Fatalf("Connect with a daemon that cannot start: %v, want exit status 2 and ErrNoDaemon", err)
	}
}

// TestE2EAutoStartRace: clients racing to start the daemon of a fresh
// workspace all get the same single daemon.
func TestE2EAutoStartRace(t *testing.T) {
	const racers = 6
	ws := workspace(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	pids := make([]int, racers)
	var wg sync.WaitGroup
	for i := range racers {
		wg.Go(func() {
			c, err := protocol.Connect(ctx, ws, nil)
			if err != nil {
				t.Error(err)
				return
			}
			defer c.Close()
			if _, err := c.Save(ctx, msg(fmt.Sprint("r", i))); err != nil {
				t.Error(err)
			}
			pids[i] = c.Hello().PID
		})
	}
	wg.Wait()
	t.Cleanup(func() {
		for _, pid := range pids {
			killPID(t, pid)
		}
	})
	for _, pid := range pids {
		if pid != pids[0] {
			t.Fatalf("clients reached different daemons: %v", pids)
		}
	}
	// Losers exit at once; give them a moment, then count.
	deadline := time.Now().Add(5 * time.Second)
	for {
		live := daemonPIDs(ws)
		if len(live) == 1 && live[0] == pids[0] {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("daemons serving %s: %v, want just %d", ws, live, pids[0])
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestE2ESecondDaemon: a second cairnd on the same workspace exits non-zero
// naming the running pid, and the first one keeps serving.
func TestE2ESecondDaemon(t *testing.T) {
	ws := workspace(t)
	p := startCairnd(t, ws)
	second := spawnCairnd(t, ws)
	if code := second.wait(t, 10*time.Second); code != 3 {
		t.Fatalf("second cairnd exit code %d, want 3; log:\n%s", code, second.logText())
	}
	if want := fmt.Sprintf("pid %d", p.cmd.Process.Pid); !strings.Contains(second.logText(), want) {
		t.Fatalf("second cairnd's message does not name %q:\n%s", want, second.logText())
	}
	if _, err := p.dial(t).Status(context.Background()); err != nil {
		t.Fatalf("first daemon disturbed: %v", err)
	}
}

// TestE2ESigterm: SIGTERM stops cairnd with exit 0, closes clients with
// 1001 and removes the socket; everything acknowledged is there after a
// restart.
func TestE2ESigterm(t *testing.T) {
	ws := workspace(t)
	p := startCairnd(t, ws)
	c := p.dial(t)
	ctx := context.Background()
	for range 10 {
		if _, err := c.Save(ctx, msg("s")); err != nil {
			t.Fatal(err)
		}
	}
	p.cmd.Process.Signal(syscall.SIGTERM)
	if code := p.wait(t, 15*time.Second); code != 0 {
		t.Fatalf("exit code %d after SIGTERM; log:\n%s", code, p.logText())
	}
	if _, err := os.Lstat(p.sock); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("socket left behind: %v", err)
	}
	if _, err := c.Status(ctx); !errors.Is(err, protocol.ErrConnectionLost) || !strings.Contains(err.Error(), "StatusGoingAway") {
		t.Fatalf("client after SIGTERM: %v", err)
	}
	p2 := startCairnd(t, ws)
	rs, err := p2.dial(t).ResumeSession(ctx, "s")
	if err != nil || rs.Generation != 10 {
		t.Fatalf("after restart: %v %v", rs, err)
	}
}

// TestE2EStaleSocket: a socket file left by a killed daemon is replaced.
func TestE2EStaleSocket(t *testing.T) {
	ws := workspace(t)
	p := startCairnd(t, ws)
	p.cmd.Process.Kill()
	p.wait(t, 10*time.Second)
	if _, err := os.Lstat(p.sock); err != nil {
		t.Fatalf("expected a stale socket after SIGKILL: %v", err)
	}
	p2 := startCairnd(t, ws)
	if _, err := p2.dial(t).Status(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// TestE2EShortSocketPath: a workspace whose socket path would not fit in
// sun_path is served on a short path recorded in cairnd.addr.
func TestE2EShortSocketPath(t *testing.T) {
	ws := workspace(t)
	deep := filepath.Join(ws, strings.Repeat("d", 60), strings.Repeat("e", 60))
	if err := os.MkdirAll(deep, 0o700); err != nil {
		t.Fatal(err)
	}
	runtime := t.TempDir()
	t.Setenv("XDG_RUNTIME_DIR", runtime)
	p := startCairnd(t, deep)
	if !strings.HasPrefix(p.sock, runtime+"/cairn/") {
		t.Fatalf("socket %s not under XDG_RUNTIME_DIR", p.sock)
	}
	fi, err := os.Stat(filepath.Dir(p.sock))
	if err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("socket dir mode: %v %v", fi.Mode(), err)
	}
	c, err := protocol.Connect(context.Background(), deep, &protocol.Options{NoAutoStart: true})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if c.Socket() != p.sock {
		t.Fatalf("client dialed %s, daemon serves %s", c.Socket(), p.sock)
	}
	p.cmd.Process.Signal(syscall.SIGTERM)
	p.wait(t, 15*time.Second)
	if _, err := os.Stat(protocol.AddrFilePath(deep)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("addr file left behind: %v", err)
	}
}

// TestE2ESocketPermissions: the socket is 0600 in a 0700 directory.
func TestE2ESocketPermissions(t *testing.T) {
	p := startCairnd(t, workspace(t))
	fi, err := os.Lstat(p.sock)
	if err != nil || fi.Mode().Perm() != 0o600 || fi.Mode()&os.ModeSocket == 0 {
		t.Fatalf("socket mode %v (%v)", fi.Mode(), err)
	}
	di, err := os.Stat(filepath.Dir(p.sock))
	if err != nil || di.Mode().Perm() != 0o700 {
		t.Fatalf("socket dir mode %v (%v)", di.Mode(), err)
	}
}

// TestE2EPeerUIDRefused: a connection from another uid is refused by the
// SO_PEERCRED check even when file permissions would let it in.
func TestE2EPeerUIDRefused(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("needs root: the daemon runs as root and the client as nobody")
	}
	setpriv, err := exec.LookPath("setpriv")
	if err != nil {
		t.Skip("setpriv (util-linux) not found; cannot run a client as another uid")
	}
	// A workspace nobody can reach, so only the peer check can refuse.
	base, err := os.MkdirTemp("", "cairn-peer-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	os.Chmod(base, 0o755)
	p := startCairnd(t, base)
	os.Chmod(filepath.Dir(p.sock), 0o755)
	os.Chmod(p.sock, 0o777)
	cmd := exec.Command(setpriv, "--reuid=nobody", "--regid=nogroup", "--clear-groups", bins.cairn, "--socket", p.sock, "daemon", "status")
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 {
		if strings.Contains(string(out), "nogroup") {
			t.Skipf("setpriv cannot switch to nobody/nogroup here: %s", out)
		}
		t.Fatalf("client as nobody: %v, output:\n%s", err, out)
	}
	if !strings.Contains(string(out), "403") || strings.Contains(string(out), "protocol.") || strings.Contains(string(out), "WebSocket") {
		t.Fatalf("refusal not reported as 403:\n%s", out)
	}
	if !strings.Contains(p.logText(), "refused connection") || !strings.Contains(p.logText(), "peer_uid=65534") {
		t.Fatalf("daemon log does not record the refusal:\n%s", p.logText())
	}
	if _, err := p.dial(t).Status(context.Background()); err != nil {
		t.Fatalf("daemon disturbed: %v", err)
	}
}
