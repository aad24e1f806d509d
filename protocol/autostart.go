package protocol

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/cairn-dev/cairn/internal/layout"
)

// DefaultStartTimeout bounds how long Connect waits for a daemon it started.
const DefaultStartTimeout = 5 * time.Second

// DefaultIdleTimeout is the idle timeout Connect gives a daemon it starts
// (cairnd --idle-timeout): with no connection open for that long, the
// daemon exits and releases the workspace, so auto-started daemons do not
// pile up or keep embedded users out. Options.DaemonArgs can override it
// ("--idle-timeout=0" keeps the daemon running); a cairnd started by hand
// has none unless given the flag.
const DefaultIdleTimeout = 10 * time.Minute

// DaemonEnv names the environment variable that points Connect at the cairnd
// executable.
const DaemonEnv = "CAIRN_DAEMON"

// ExitAlreadyRunning is cairnd's exit status when another process already
// serves (holds the lock of) the workspace.
const ExitAlreadyRunning = 3

// Connect connects to the daemon of workspace, starting one when none
// answers (unless opts.NoAutoStart). An empty workspace is the one
// Discover finds from the current directory. A started cairnd runs detached, in its
// own session, with its standard error appended to .cairn/cairnd.log
// (rotated first when it is over DaemonLogMaxBytes), and exits once no
// client has been connected for DefaultIdleTimeout (unless opts.DaemonArgs
// give another --idle-timeout).
//
// A daemon that goes away during the handshake (the connection is closed
// or reset before the upgrade is answered, or it answers 503) is dialed
// again, with backoff, until it answers or its socket is gone; then one is
// started as when none answered. Connect gives up after opts.StartTimeout
// with an error wrapping ErrUnavailable.
//
// Two clients racing to start a daemon both start one; the store's lock lets
// exactly one of them serve and the other exits, and both clients keep
// dialing until the survivor answers. When the daemon Connect started exits
// because the workspace was taken, yet nothing answers (the holder was a
// daemon on its way out), Connect starts another; when it exits for any
// other reason, Connect fails at once, naming its status, the last line it
// logged, and its log.
//
// When the workspace is held by a process that is not a cairnd (embedded
// mode), no daemon can serve it: Connect fails at once, without starting
// one, with an error wrapping a *session.LockedError that names the
// holder's pid (code locked). It tells the holder from a daemon by its
// executable, which needs /proc (Linux); elsewhere it waits as for a
// daemon on its way out.
//
// The returned Client reconnects, auto-starting again, on the first call
// after its connection is lost.
func Connect(ctx context.Context, workspace string, opts *Options) (*Client, error) {
	var ws string
	var err error
	if workspace == "" {
		ws, _, err = Discover("")
	} else {
		ws, err = Workspace(workspace)
	}
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
	timeout := c.opts.StartTimeout
	if timeout <= 0 {
		timeout = DefaultStartTimeout
	}
	deadline := time.Now().Add(timeout)
	backoff := 5 * time.Millisecond
	var (
		bin  string
		proc *started // the daemon this call started last, if any
	)
	for {
		// The daemon may have written (or removed) an addr file by now.
		sock, err := SocketPath(c.workspace)
		if err != nil {
			return nil, fmt.Errorf("protocol.Connect: %w", err)
		}
		c.socket = sock
		cn, err := c.dial(ctx)
		switch {
		case err == nil:
			return cn, nil
		case errors.Is(err, ErrNoDaemon):
			if c.opts.NoAutoStart {
				return nil, fmt.Errorf("protocol.Connect: %w", err)
			}
		case errors.As(err, new(*NoAnswerError)):
			// A daemon that took the connection and kept silent until the
			// caller's deadline: nothing is left to wait with.
			return nil, err
		case errors.Is(err, ErrUnavailable):
			// Going away: dial again until it is gone (or back).
		default:
			return nil, err
		}

		if errors.Is(err, ErrNoDaemon) && proc == nil {
			b, _, ferr := FindDaemon(c.opts.DaemonPath)
			if ferr != nil {
				return nil, fmt.Errorf("protocol.Connect: no daemon at %s and cannot start one: %w", c.socket, ferr)
			}
			bin = b
			if herr := c.embeddedHolder(bin); herr != nil {
				return nil, herr
			}
			if proc, err = c.startDaemon(bin); err != nil {
				return nil, fmt.Errorf("protocol.Connect: no daemon at %s; starting %s: %w", c.socket, bin, err)
			}
		} else if proc != nil && proc.exited() {
			if proc.code() != ExitAlreadyRunning {
				return nil, fmt.Errorf("protocol.Connect: started %s (pid %d) for workspace %s, but it %s%s; see %s: %w",
					bin, proc.pid, c.workspace, proc.status(), proc.said(), proc.log, err)
			}
			// Another process held the workspace when ours started, yet
			// nothing answers. When that is an embedded user, no daemon
			// will; otherwise it may be a daemon exiting (a killed daemon
			// keeps its lock until it is gone), or still starting. Start
			// another, at most every restartGap.
			if herr := c.embeddedHolder(bin); herr != nil {
				return nil, herr
			}
			if errors.Is(err, ErrNoDaemon) && time.Since(proc.at) >= restartGap {
				if next, serr := c.startDaemon(bin); serr == nil {
					proc = next
				}
			}
		}
		if time.Now().After(deadline) {
			if proc == nil {
				return nil, fmt.Errorf("protocol.Connect: the daemon of workspace %s did not answer within %v: %w",
					c.workspace, timeout, err)
			}
			return nil, fmt.Errorf("protocol.Connect: started %s (pid %d, %s) for workspace %s but nothing answered at %s within %v; see %s: %w: %w",
				bin, proc.pid, proc.status(), c.workspace, c.socket, timeout, proc.log, ErrUnavailable, err)
		}
		// Wake when the started daemon exits, too: its status says
		// more than the next dial would.
		var exited <-chan struct{}
		if proc != nil && !proc.exited() {
			exited = proc.done
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("protocol.Connect: waiting for the daemon of %s: %w", c.workspace, ctx.Err())
		case <-exited:
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, 200*time.Millisecond)
	}
}

// FindDaemon returns the cairnd executable to start: explicit when
// non-empty, else $CAIRN_DAEMON, else "cairnd" in the directory of the
// loaded libcairn (LibraryPath), else "cairnd" next to the running
// executable, else "cairnd" on PATH. The library comes before the
// executable because a binding's host process is python or node, whose
// directory holds no cairnd, while a package ships cairnd beside libcairn.
// The second result lists what was tried, for error messages.
func FindDaemon(explicit string) (string, []string, error) {
	var tried []string
	if explicit != "" {
		return explicit, []string{explicit}, nil
	}
	if env := os.Getenv(DaemonEnv); env != "" {
		return env, []string{"$" + DaemonEnv + "=" + env}, nil
	}
	tried = append(tried, "$"+DaemonEnv+" (unset)")
	var dirs []string
	if lib := LibraryPath(); lib != "" {
		dirs = append(dirs, filepath.Dir(lib))
	}
	if exe, err := os.Executable(); err == nil {
		dirs = append(dirs, filepath.Dir(exe))
	}
	for _, dir := range dirs {
		p := filepath.Join(dir, "cairnd")
		if slices.Contains(tried, p) {
			continue
		}
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

// libraryPath is the absolute path of the loaded libcairn, or "".
var libraryPath atomic.Pointer[string]

// SetLibraryPath records the path of the loaded libcairn (the shared
// library this process runs protocol from), for FindDaemon. libcairn calls
// it once when it is loaded, with the file dladdr names; a relative path
// is made absolute against the current directory. Programs that link
// protocol directly never call it.
func SetLibraryPath(path string) {
	if path != "" {
		if abs, err := filepath.Abs(path); err == nil {
			path = abs
		}
	}
	libraryPath.Store(&path)
}

// LibraryPath returns the path SetLibraryPath recorded, or "".
func LibraryPath() string {
	if p := libraryPath.Load(); p != nil {
		return *p
	}
	return ""
}

// restartGap is the least time between two daemons Connect starts.
const restartGap = 250 * time.Millisecond

// DaemonLogMaxBytes is the size past which .cairn/cairnd.log is rotated:
// when Connect starts a daemon and finds the log larger, it renames it to
// cairnd.log.1 (replacing the one kept before) and starts a new one. A
// daemon that runs on writes to the file it was given, so the log can grow
// past the limit until the next start.
const DaemonLogMaxBytes = 1 << 20

// started is a daemon process started by Connect.
type started struct {
	at   time.Time
	pid  int
	log  string
	from int64         // the log's size when the process started
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

// said returns ", saying: <line>" with the last line the process wrote to
// its log (after p.from; at most the last 4 KiB are read), or "".
func (p *started) said() string {
	f, err := os.Open(p.log)
	if err != nil {
		return ""
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil || fi.Size() <= p.from {
		return ""
	}
	off := max(p.from, fi.Size()-4096)
	b := make([]byte, fi.Size()-off)
	n, _ := f.ReadAt(b, off)
	lines := strings.Split(strings.TrimSpace(string(b[:n])), "\n")
	last := strings.TrimSpace(lines[len(lines)-1])
	if last == "" {
		return ""
	}
	if len(last) > 512 {
		last = last[:512] + "…"
	}
	return ", saying: " + last
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
	logf, err := openDaemonLog(logPath)
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	var from int64
	if fi, err := logf.Stat(); err == nil {
		from = fi.Size()
	}
	devnull, err := os.Open(os.DevNull)
	if err != nil {
		return nil, err
	}
	defer devnull.Close()
	// DaemonArgs come last: cairnd's flags take the last value given, so
	// the caller's --idle-timeout overrides the default.
	args := append([]string{"--workspace", c.workspace, "--idle-timeout=" + DefaultIdleTimeout.String()}, c.opts.DaemonArgs...)
	cmd := exec.Command(bin, args...)
	cmd.Dir = c.workspace
	cmd.Stdin, cmd.Stdout, cmd.Stderr = devnull, logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &started{at: time.Now(), pid: cmd.Process.Pid, log: logPath, from: from, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// openDaemonLog opens the daemon log at path for appending, first rotating
// it to path.1 when it is over DaemonLogMaxBytes. Rotation happens under
// a flock on the old file, and only while path still names that file, so
// clients starting daemons at once rotate it once and keep the old one.
func openDaemonLog(path string) (*os.File, error) {
	const flags = os.O_WRONLY | os.O_CREATE | os.O_APPEND | syscall.O_NOFOLLOW | syscall.O_CLOEXEC
	for range 3 {
		f, err := os.OpenFile(path, flags, 0o600)
		if err != nil {
			return nil, err
		}
		fi, err := f.Stat()
		if err != nil || fi.Size() <= DaemonLogMaxBytes {
			return f, nil
		}
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
			return f, nil
		}
		if cur, err := os.Lstat(path); err == nil && os.SameFile(cur, fi) {
			if err := os.Rename(path, path+".1"); err != nil {
				return f, nil // an over-size log beats none
			}
		}
		f.Close() // drops the flock; the next round opens the new file
	}
	return os.OpenFile(path, flags, 0o600)
}
