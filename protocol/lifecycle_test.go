package protocol_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/api"
	"github.com/cairn-dev/cairn/fsstore"
	"github.com/cairn-dev/cairn/internal/testkit"
	"github.com/cairn-dev/cairn/protocol"
	"github.com/cairn-dev/cairn/session"
)

// longWorkspace returns a canonical workspace whose default socket path is
// longer than sun_path holds.
func longWorkspace(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for len(protocol.DefaultSocketPath(dir)) <= protocol.MaxSocketPathLen+20 {
		dir = filepath.Join(dir, strings.Repeat("d", 30))
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	ws, err := protocol.Workspace(dir)
	if err != nil {
		t.Fatal(err)
	}
	return ws
}

// TestSocketPathLongWorkspace: with no addr file (no daemon ever ran), a
// workspace whose default socket path is too long is dialed at the short
// path a daemon would bind, never at the over-long one.
func TestSocketPathLongWorkspace(t *testing.T) {
	ws := longWorkspace(t)
	got, err := protocol.SocketPath(ws)
	if err != nil {
		t.Fatal(err)
	}
	if want := protocol.ShortSocketPath(ws); got != want {
		t.Fatalf("SocketPath = %q (%d bytes), want the short path %q", got, len(got), want)
	}
}

// TestConnectLongWorkspace: auto-start works on a deeply nested workspace
// with no daemon running. The client used to dial the over-long default
// path and fail with "connect: invalid argument" instead of starting one.
func TestConnectLongWorkspace(t *testing.T) {
	t.Setenv("XDG_RUNTIME_DIR", t.TempDir())
	ws := longWorkspace(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := protocol.Connect(ctx, ws, &protocol.Options{DaemonPath: cairnd(t), StartTimeout: 30 * time.Second})
	if err != nil {
		t.Fatalf("Connect on a %d-byte socket path workspace: %v", len(protocol.DefaultSocketPath(ws)), err)
	}
	pid := c.Hello().PID
	t.Cleanup(func() { c.Close(); stopDaemon(t, pid) })
	if _, err := c.Status(ctx); err != nil {
		t.Fatal(err)
	}
	if got, want := c.Socket(), protocol.ShortSocketPath(ws); got != want {
		t.Fatalf("client dialed %q, want the short path %q", got, want)
	}
	if b, err := os.ReadFile(protocol.AddrFilePath(ws)); err != nil || strings.TrimSpace(string(b)) != c.Socket() {
		t.Fatalf("addr file holds %q (%v), want %q", b, err, c.Socket())
	}
}

// waitGone waits (bounded) until pid no longer exists; the client's reaper
// goroutine reaps the daemons this process started.
func waitGone(t *testing.T, pid int, within time.Duration) {
	t.Helper()
	for deadline := time.Now().Add(within); !errors.Is(syscall.Kill(pid, 0), syscall.ESRCH); {
		if time.Now().After(deadline) {
			t.Fatalf("daemon pid %d still running after %v", pid, within)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestAutoStartPassesIdleTimeout: a daemon Connect starts gets the default
// idle timeout, before the caller's daemon arguments (which override it).
func TestAutoStartPassesIdleTimeout(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want []string
	}{
		{name: "default", want: []string{"--idle-timeout=" + protocol.DefaultIdleTimeout.String()}},
		{name: "override", args: []string{"--idle-timeout=0s"},
			want: []string{"--idle-timeout=" + protocol.DefaultIdleTimeout.String(), "--idle-timeout=0s"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ws := newWorkspace(t)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			c, err := protocol.Connect(ctx, ws, &protocol.Options{DaemonPath: cairnd(t), DaemonArgs: tc.args, StartTimeout: 30 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			pid := c.Hello().PID
			t.Cleanup(func() { c.Close(); stopDaemon(t, pid) })
			b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
			if err != nil {
				t.Skipf("no /proc: %v", err)
			}
			args := strings.Split(strings.TrimRight(string(b), "\x00"), "\x00")
			var idle []string
			for _, a := range args {
				if strings.HasPrefix(a, "--idle-timeout") {
					idle = append(idle, a)
				}
			}
			if !slices.Equal(idle, tc.want) {
				t.Fatalf("daemon started with %q; idle flags %q, want %q", args, idle, tc.want)
			}
		})
	}
}

// connectNew connects a Client that auto-starts cairnd (with daemonArgs)
// on a new workspace and returns the workspace, the options (for another
// Connect), the client and its daemon's pid; that daemon is stopped at
// cleanup.
func connectNew(ctx context.Context, t *testing.T, daemonArgs ...string) (string, *protocol.Options, *protocol.Client, int) {
	t.Helper()
	ws := newWorkspace(t)
	opts := &protocol.Options{DaemonPath: cairnd(t), DaemonArgs: daemonArgs, StartTimeout: 30 * time.Second}
	c, err := protocol.Connect(ctx, ws, opts)
	if err != nil {
		t.Fatal(err)
	}
	pid := c.Hello().PID
	t.Cleanup(func() { stopDaemon(t, pid) })
	return ws, opts, c, pid
}

// TestIdleExitReleasesLock: an auto-started daemon with a short idle
// timeout exits once its last client is gone, the workspace's lock is free
// (an embedded open succeeds), and the next Connect starts a new daemon.
func TestIdleExitReleasesLock(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ws, opts, c, first := connectNew(ctx, t, "--idle-timeout=1s")
	if _, err := c.Status(ctx); err != nil {
		t.Fatal(err)
	}
	c.Close()
	waitGone(t, first, 30*time.Second)

	st, err := fsstore.Open(ws, fsstore.Options{})
	if err != nil {
		t.Fatalf("embedded open after the daemon's idle exit: %v", err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}

	c2, err := protocol.Connect(ctx, ws, opts)
	if err != nil {
		t.Fatalf("Connect after the idle exit: %v", err)
	}
	second := c2.Hello().PID
	t.Cleanup(func() { c2.Close(); stopDaemon(t, second) })
	if second == first || second <= 0 {
		t.Fatalf("second daemon pid %d, first %d: want a new daemon", second, first)
	}
	if _, err := c2.Status(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestCallToADeadDaemonIsSentAgain: a daemon killed between two calls,
// the client's reader not yet run since (held back here, as a busy machine
// can hold it): the next call finds the connection alive, writes its
// request on it and the write fails, so no daemon saw the request. The
// call is sent again, once, on a new connection to a newly started daemon:
// it succeeds and its save is made once.
func TestCallToADeadDaemonIsSentAgain(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	_, _, c, first := connectNew(ctx, t)
	t.Cleanup(func() { c.Close() })
	save := func(text string) error {
		_, err := c.Save(ctx, api.SaveRequest{SessionID: "s", Change: &session.Change{AppendMessages: []session.Value{session.Value(fmt.Sprintf("%q", text))}}})
		return err
	}
	if err := save("before"); err != nil {
		t.Fatal(err)
	}

	held := make(chan struct{}, 1)
	restore := protocol.SetReadFailedHook(func(dead <-chan struct{}) {
		select {
		case held <- struct{}{}:
		default:
		}
		select {
		case <-dead:
		case <-time.After(20 * time.Second):
		}
	})
	t.Cleanup(restore)
	if err := syscall.Kill(first, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitGone(t, first, 30*time.Second)
	select {
	case <-held:
	case <-time.After(20 * time.Second):
		t.Fatal("the reader did not see the kill")
	}

	if err := save("after"); err != nil {
		t.Fatalf("the call after the kill: %v", err)
	}
	second := c.Hello().PID
	t.Cleanup(func() { stopDaemon(t, second) })
	if second == first || second <= 0 {
		t.Fatalf("daemon pid %d after the kill, %d before: want a new daemon", second, first)
	}
	rs, err := c.ResumeSession(ctx, "s")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, m := range rs.Snapshot.Messages {
		got = append(got, string(m))
	}
	if want := []string{`"before"`, `"after"`}; !slices.Equal(got, want) {
		t.Fatalf("messages %q, want %q", got, want)
	}
}

// TestConnectToAStoppedDaemon: a daemon stopped with SIGSTOP takes the
// connection and never answers. Connect gives up when the caller's
// context ends, with a NoAnswerError (unavailable) naming the daemon's pid
// and its stopped state, instead of dialing again until then and saying
// only that the context ended; after SIGCONT the same workspace connects.
func TestConnectToAStoppedDaemon(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ws, opts, c, pid := connectNew(ctx, t)
	c.Close()
	resume := testkit.Stop(t, pid)

	short, stop := context.WithTimeout(ctx, 500*time.Millisecond)
	defer stop()
	_, err := protocol.Connect(short, ws, opts)
	var na *protocol.NoAnswerError
	if !errors.As(err, &na) || na.PID != pid || na.State != 'T' || protocol.CodeOf(err) != api.CodeUnavailable {
		t.Fatalf("Connect to a stopped daemon: %v, want a NoAnswerError naming pid %d, stopped, code unavailable", err, pid)
	}
	if !errors.Is(err, protocol.ErrNoAnswer) || !strings.Contains(err.Error(), fmt.Sprintf("`kill -CONT %d` resumes it", pid)) {
		t.Fatalf("Connect to a stopped daemon: %v", err)
	}

	resume()
	c, err = protocol.Connect(ctx, ws, opts)
	if err != nil {
		t.Fatalf("Connect once the daemon runs again: %v", err)
	}
	c.Close()
}

// TestRunSettlesATurnOfUnknownOutcome: AgentRun.Turn on a stopped daemon
// fails with unavailable (a call timeout). When the daemon carries the
// checkpoint out after all, the host's retry of that Turn returns its
// number without saving it twice (even when the retry's JSON texts differ
// from the first's) and the next Turn follows it; when the
// request was cut before it was whole, the next Turn takes its number.
// The totals are what was committed.
func TestRunSettlesATurnOfUnknownOutcome(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ws, opts, plain, pid := connectNew(ctx, t)
	defer plain.Close()
	bounded := *opts
	bounded.CallTimeout = 400 * time.Millisecond
	c, err := protocol.Connect(ctx, ws, &bounded)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	msg := func(s string) []session.Value { return []session.Value{session.Value(fmt.Sprintf(`{"t":%q}`, s))} }
	run, err := c.StartRun(ctx, "s", protocol.RunOptions{})
	if err != nil {
		t.Fatal(err)
	}
	turn := func(tt protocol.Turn, want int64) {
		t.Helper()
		if n, err := run.Turn(ctx, tt); err != nil || n != want {
			t.Fatalf("turn: %d, %v; want %d", n, err, want)
		}
	}
	turn(protocol.Turn{Messages: msg("1"), Usage: session.Usage{InputTokens: 1}, ToolCalls: 1}, 1)

	second := protocol.Turn{Messages: msg("2"), Usage: session.Usage{InputTokens: 2}, ToolCalls: 1, State: session.Value(`{"k":2}`)}
	resume := testkit.Stop(t, pid)
	if _, err := run.Turn(ctx, second); !errors.Is(err, protocol.ErrNoAnswer) {
		t.Fatalf("turn on a stopped daemon: %v, want no answer", err)
	}
	resume()
	for {
		rec, err := plain.Run(ctx, api.RunRequest{RunID: run.RunID()})
		if err != nil {
			t.Fatal(err)
		}
		if rec.Checkpoint != nil && rec.Checkpoint.Turn == 2 {
			break // the daemon carried it out
		}
		time.Sleep(20 * time.Millisecond)
	}
	// The host retries the turn it encoded again: the same values in
	// other texts.
	again := protocol.Turn{Messages: []session.Value{session.Value(`{ "t": "2" }`)}, Usage: second.Usage, ToolCalls: 1, State: session.Value(`{"k": 2.0}`)}
	turn(again, 2)
	if u, n := run.Usage(), run.ToolCallsCount(); u.InputTokens != 3 || n != 2 || string(run.State()) != `{"k":2}` {
		t.Fatalf("totals after the settled turn: %+v, %d, %s", u, n, run.State())
	}
	turn(protocol.Turn{Messages: msg("3")}, 3)

	resume = testkit.Stop(t, pid)
	big := protocol.Turn{Messages: msg(strings.Repeat("x", 16<<20)), Usage: session.Usage{InputTokens: 9}, ToolCalls: 9}
	if _, err := run.Turn(ctx, big); !errors.Is(err, protocol.ErrNoAnswer) {
		t.Fatalf("a 16 MiB turn on a stopped daemon: %v, want no answer", err)
	}
	resume()
	turn(protocol.Turn{Messages: msg("4"), Usage: session.Usage{InputTokens: 4}}, 4)
	if err := run.Complete(ctx); err != nil {
		t.Fatal(err)
	}
	rec, err := plain.Run(ctx, api.RunRequest{RunID: run.RunID()})
	if err != nil || rec.Run.Usage.InputTokens != 7 || rec.Run.ToolCallsCount != 2 {
		t.Fatalf("the completed run: %+v, %v; want 7 input tokens, 2 tool calls", rec.Run, err)
	}
	ms, err := plain.Messages(ctx, api.MessagesRequest{SessionID: "s"})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, m := range ms.Messages {
		got = append(got, string(m))
	}
	if want := []string{`{"t":"1"}`, `{"t":"2"}`, `{"t":"3"}`, `{"t":"4"}`}; !slices.Equal(got, want) {
		t.Fatalf("messages: %.200q, want %q", got, want)
	}
}
