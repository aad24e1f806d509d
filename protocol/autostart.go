package protocol

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/cairn-dev/cairn/internal/layout"
)

// DefaultStartTimeout bounds how long Connect waits for a daemon it started.
const DefaultStartTimeout = 5 * time.Second

// DaemonEnv names the environment variable that points Connect at the cairnd
// executable.
const DaemonEnv = "CAIRN_DAEMON"

// ExitAlreadyRunning is cairnd's exit status when another process already
// serves (holds the lock of) the workspace.
const ExitAlreadyRunning = 3

// Connect connects to the daemon of workspace, starting one when none
// answers (unless opts.NoAutoStart). A started cairnd runs detached, in its
// own session, with its standard error appended to .cairn/cairnd.log.
//
// Two clients racing to start a daemon both start one; the store's lock lets
// exactly one of them serve and the other exits, and both clients keep
// dialing until the survivor answers. When the daemon Connect started exits
// because the workspace was taken, yet nothing answers (the holder was a
// daemon on its way out), Connect starts another; when it exits for any
// other reason, Connect fails at once, naming its status and log.
//
// The returned Client reconnects, auto-starting again, on the first call
// after its connection is lost.
func Connect(ctx context.Context, workspace string, opts *Options) (*Client, error) {
	ws, err := Workspace(workspace)
	if err != nil {
		return nil, fmt.Errorf("protocol.Connect: %w", err)
	}
	c := &Client{workspace: ws}
	if opts != nil {
		c.opts = *opts
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	cn, err := c.connectLocked(ctx)
	if err != nil {
		return nil, err
	}
	c.cur = cn
	return c, nil
}

// connectLocked dials the workspace's daemon, starting it when needed.
func (c *Client) connectLocked(ctx context.Context) (*conn, error) {
	sock, err := SocketPath(c.workspace)
	if err != nil {
		return nil, fmt.Errorf("protocol.Connect: %w", err)
	}
	c.socket = sock
	cn, err := c.dial(ctx)
	if err == nil || !errors.Is(err, ErrNoDaemon) {
		return cn, err
	}
	if c.opts.NoAutoStart {
		return nil, fmt.Errorf("protocol.Connect: %w", err)
	}
	bin, _, err := FindDaemon(c.opts.DaemonPath)
	if err != nil {
		return nil, fmt.Errorf("protocol.Connect: no daemon at %s and cannot start one: %w", sock, err)
	}
	proc, err := c.startDaemon(bin)
	if err != nil {
		return nil, fmt.Errorf("protocol.Connect: no daemon at %s; starting %s: %w", sock, bin, err)
	}

	timeout := c.opts.StartTimeout
	if timeout <= 0 {
		timeout = DefaultStartTimeout
	}
	deadline := time.Now().Add(timeout)
	backoff := 5 * time.Millisecond
	for {
		// The daemon may have written an addr file by now.
		if p, perr := SocketPath(c.workspace); perr == nil {
			c.socket = p
		}
		cn, err = c.dial(ctx)
		if err == nil || !errors.Is(err, ErrNoDaemon) {
			return cn, err
		}
		if proc.exited() {
			if proc.code() != ExitAlreadyRunning {
				return nil, fmt.Errorf("protocol.Connect: started %s (pid %d) for workspace %s, but it %s; see %s: %w",
					bin, proc.pid, c.workspace, proc.status(), proc.log, err)
			}
			// Another process held the workspace when ours started, yet
			// nothing answers: it may have been exiting (a killed daemon
			// keeps its lock until it is gone), or still starting. Start
			// another, at most every restartGap.
			if time.Since(proc.at) >= restartGap {
				if next, serr := c.startDaemon(bin); serr == nil {
					proc = next
				}
			}
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("protocol.Connect: started %s (pid %d, %s) for workspace %s but nothing answered at %s within %v; see %s: %w",
				bin, proc.pid, proc.status(), c.workspace, c.socket, timeout, proc.log, err)
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("protocol.Connect: waiting for %s to start: %w", bin, ctx.Err())
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, 200*time.Millisecond)
	}
}

// FindDaemon returns the cairnd executable to start: explicit when
// non-empty, else $CAIRN_DAEMON, else "cairnd" next to the running
// executable, else "cairnd" on PATH. The second result lists what was tried,
// for error messages.
func FindDaemon(explicit string) (string, []string, error) {
	var tried []string
	if explicit != "" {
		return explicit, []string{explicit}, nil
	}
	if env := os.Getenv(DaemonEnv); env != "" {
		return env, []string{"$" + DaemonEnv + "=" + env}, nil
	}
	tried = append(tried, "$"+DaemonEnv+" (unset)")
	if exe, err := os.Executable(); err == nil {
		p := filepath.Join(filepath.Dir(exe), "cairnd")
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return p, tried, nil
		}
		tried = append(tried, p)
	}
	if p, err := exec.LookPath("cairnd"); err == nil {
		return p, tried, nil
	}
	tried = append(tried, "cairnd on $PATH")
	return "", tried, fmt.Errorf("%w: cairnd executable not found; tried %s", ErrNoDaemon, strings.Join(tried, ", "))
}

// restartGap is the least time between two daemons Connect starts.
const restartGap = 250 * time.Millisecond

// started is a daemon process started by Connect.
type started struct {
	at   time.Time
	pid  int
	log  string
	done chan struct{} // closed when the process has exited and was reaped
	err  error         // its exit error, valid after done
}

// exited reports whether the process has exited.
func (p *started) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// code is the exit status of an exited process; -1 when it was killed by
// a signal or could not be waited for.
func (p *started) code() int {
	var ee *exec.ExitError
	switch {
	case p.err == nil:
		return 0
	case errors.As(p.err, &ee):
		return ee.ExitCode()
	}
	return -1
}

func (p *started) status() string {
	select {
	case <-p.done:
		if p.err != nil {
			return "exited: " + p.err.Error()
		}
		return "exited with status 0"
	default:
		return "still running"
	}
}

// startDaemon starts bin for c.workspace in a new session, detached from
// the caller's terminal. A goroutine waits for the process so it is reaped
// whenever it exits; it lives as long as the daemon (or this process).
func (c *Client) startDaemon(bin string) (*started, error) {
	dir := layout.StateDir(c.workspace)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	logPath := layout.DaemonLog(c.workspace)
	logf, err := os.OpenFile(logPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	devnull, err := os.Open(os.DevNull)
	if err != nil {
		return nil, err
	}
	defer devnull.Close()
	args := append([]string{"--workspace", c.workspace}, c.opts.DaemonArgs...)
	cmd := exec.Command(bin, args...)
	cmd.Dir = c.workspace
	cmd.Stdin, cmd.Stdout, cmd.Stderr = devnull, logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &started{at: time.Now(), pid: cmd.Process.Pid, log: logPath, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}
