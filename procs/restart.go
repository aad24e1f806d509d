package procs

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/cairn-dev/cairn/api"
	"github.com/cairn-dev/cairn/session"
)

// Restart defaults.
const (
	DefaultRestartTimeout = 30 * time.Second
	DefaultCheckTimeout   = 2 * time.Second
	DefaultKillGrace      = 3 * time.Second
	// pollStart and pollMax bound the backoff between health checks.
	pollStart = 50 * time.Millisecond
	pollMax   = time.Second
	// noCheckSettle is how long Restart watches a process that has no
	// health check and no port, to catch one that fails at once.
	noCheckSettle = time.Second
	// reapWait bounds how long Restart waits for a SIGKILLed leader to be
	// reaped.
	reapWait = 5 * time.Second
)

// Outcomes of Restart.
const (
	OutcomeStarted        = "started"         // started now (and proven healthy, unless State says unknown)
	OutcomeAlreadyHealthy = "already_healthy" // the health check passed; nothing was started
	OutcomeFailed         = "failed"          // not started, or started and killed again; see Error
)

// Options tell Restart where and how long.
type Options struct {
	// LogDir is the directory the process's stdout and stderr are appended
	// to, as <LogDir>/<name>.log (the name made file-safe); created 0700 if
	// missing. Required. Normally <workspace>/.cairn/logs.
	LogDir string
	// Timeout bounds the wait for the health check to pass after the
	// start (DefaultRestartTimeout when zero).
	Timeout time.Duration
	// CheckTimeout bounds each health check attempt (DefaultCheckTimeout
	// when zero).
	CheckTimeout time.Duration
	// KillGrace is how long the process group gets between SIGTERM and
	// SIGKILL when Restart gives up (DefaultKillGrace when zero).
	KillGrace time.Duration
	// Environ is the environment to start with; nil means the current
	// one (os.Environ). Values are passed to the process and nowhere else.
	Environ []string
}

// Restart brings the recorded process p back, unless its health check
// passes now (OutcomeAlreadyHealthy: nothing is started).
//
// It refuses, with ErrPortBusy and without starting anything, when p's
// recorded port already accepts connections but the health check fails.
// Otherwise it starts p.Command directly (no shell) in p.Cwd, detached in
// a new session and process group, with the environment of opts (the
// current one by default), stdout and stderr appended to the log file,
// then polls the health check with backoff until it passes or
// opts.Timeout runs out. On success the Result holds the pid and the time
// taken. On timeout (ErrTimeout), a failing exit of the process
// (ErrExited; an exit 0 is taken for a daemonizing command and polling
// goes on) or ctx's end, it kills the whole process group (SIGTERM, then
// SIGKILL after opts.KillGrace) and returns the error naming the last
// failure, with Result filled in as far as it got.
//
// Invalid input (see ValidateProcess; opts.LogDir empty) is an
// invalid_argument error and starts nothing.
func Restart(ctx context.Context, p session.Process, opts Options) (api.RestartResult, error) {
	res := api.RestartResult{Name: p.Name, Outcome: OutcomeFailed, State: StateUnknown}
	fail := func(err error) (api.RestartResult, error) {
		res.Error = err.Error()
		return res, err
	}
	if err := ValidateProcess(p); err != nil {
		return fail(err)
	}
	if opts.LogDir == "" {
		return fail(invalid(nil, "procs.Restart: no log directory given"))
	}
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultRestartTimeout
	}
	if opts.CheckTimeout <= 0 {
		opts.CheckTimeout = DefaultCheckTimeout
	}
	if opts.KillGrace <= 0 {
		opts.KillGrace = DefaultKillGrace
	}
	environ := opts.Environ
	if environ == nil {
		environ = os.Environ()
	}
	res.MissingEnv = missingKeys(p.EnvKeys, environ)

	// Never start what is already healthy, nor a second copy on a busy port.
	st, detail := check(ctx, p, opts.Environ, opts.CheckTimeout)
	res.State, res.Detail = st, detail
	if st == StateHealthy {
		res.Outcome = OutcomeAlreadyHealthy
		return res, nil
	}
	if err := ctx.Err(); err != nil {
		return fail(fmt.Errorf("procs.Restart %q: %w", p.Name, err))
	}
	if p.Port > 0 {
		pctx, cancel := context.WithTimeout(ctx, opts.CheckTimeout)
		open, _ := portOpen(pctx, p.Port)
		cancel()
		if open {
			return fail(fmt.Errorf("procs.Restart %q: %w: port %d accepts connections but the health check does not pass (%s); stop whatever listens there first", p.Name, ErrPortBusy, p.Port, detail))
		}
	}

	logPath := filepath.Join(opts.LogDir, LogName(p.Name))
	res.Log = logPath
	logf, err := openLog(opts.LogDir, logPath)
	if err != nil {
		return fail(fmt.Errorf("procs.Restart %q: %w", p.Name, err))
	}
	fmt.Fprintf(logf, "--- cairn: restarting %q at %s ---\n", p.Name, time.Now().UTC().Format(time.RFC3339))
	cmd := exec.Command(p.Command[0], p.Command[1:]...)
	cmd.Dir = p.Cwd
	cmd.Env = opts.Environ
	cmd.Stdout, cmd.Stderr = logf, logf
	setDetached(cmd)
	start := time.Now()
	err = cmd.Start()
	logf.Close() // the child has its own descriptor
	if err != nil {
		res.State = StateNotRunning
		return fail(fmt.Errorf("procs.Restart %q: start: %w", p.Name, err))
	}
	pid := cmd.Process.Pid
	res.PID = pid
	exited := make(chan struct{})
	var waitErr error
	go func() {
		// Reap the process whenever it exits, so it never lingers as a
		// zombie of a long-lived caller.
		waitErr = cmd.Wait()
		close(exited)
	}()
	took := func() { res.TookMS = time.Since(start).Milliseconds() }

	giveUp := func(cause error) (api.RestartResult, error) {
		stopGroup(pid, exited, opts.KillGrace)
		took()
		res.State = StateNotRunning
		return fail(cause)
	}

	hasCheck := p.HealthCheck != nil && (p.HealthCheck.URL != "" || len(p.HealthCheck.Command) > 0)
	if !hasCheck && p.Port == 0 {
		// Nothing can prove it up; only catch a process that fails at once.
		select {
		case <-exited:
			if waitErr != nil {
				return giveUp(fmt.Errorf("procs.Restart %q: %w (%v); see %s", p.Name, ErrExited, waitErr, logPath))
			}
		case <-ctx.Done():
			return giveUp(fmt.Errorf("procs.Restart %q: %w", p.Name, ctx.Err()))
		case <-time.After(min(noCheckSettle, opts.Timeout)):
		}
		took()
		res.Outcome, res.State = OutcomeStarted, StateUnknown
		res.Detail = "started; no health check or port is recorded, so cairn cannot prove it is up"
		return res, nil
	}

	deadline := start.Add(opts.Timeout)
	delay := pollStart
	last := "no health check has run yet"
	watch := exited // nil once an exit 0 was seen
	for {
		remaining := time.Until(deadline)
		if remaining <= 0 {
			break
		}
		if !hasCheck {
			// Only a port is recorded: it accepting connections is all the
			// proof there is, and not enough to call the process healthy.
			pctx, cancel := context.WithTimeout(ctx, min(opts.CheckTimeout, remaining))
			open, _ := portOpen(pctx, p.Port)
			cancel()
			if open {
				took()
				res.Outcome, res.State = OutcomeStarted, StateUnknown
				res.Detail = fmt.Sprintf("started; port %d accepts connections (no health check is recorded to prove more)", p.Port)
				return res, nil
			}
			last = fmt.Sprintf("nothing listens on port %d yet", p.Port)
		} else if st, detail := check(ctx, p, opts.Environ, min(opts.CheckTimeout, remaining)); st == StateHealthy {
			took()
			res.Outcome, res.State, res.Detail = OutcomeStarted, StateHealthy, detail
			return res, nil
		} else {
			last = detail
		}
		res.Detail = last
		wait := min(delay, time.Until(deadline))
		if wait <= 0 {
			break
		}
		timer := time.NewTimer(wait)
		select {
		case <-watch:
			timer.Stop()
			if waitErr != nil {
				return giveUp(fmt.Errorf("procs.Restart %q: %w (%v); last health check: %s; see %s", p.Name, ErrExited, waitErr, last, logPath))
			}
			watch = nil // exit 0: a command that daemonizes; keep polling
		case <-ctx.Done():
			timer.Stop()
			return giveUp(fmt.Errorf("procs.Restart %q: %w; last health check: %s", p.Name, ctx.Err(), last))
		case <-timer.C:
		}
		delay = min(delay*2, pollMax)
	}
	return giveUp(fmt.Errorf("procs.Restart %q: %w within %v; last failure: %s; process group %d killed; see %s", p.Name, ErrTimeout, opts.Timeout, last, pid, logPath))
}

// stopGroup ends process group pgid: SIGTERM, up to grace for the group to
// empty, then SIGKILL; then it waits (bounded) for the leader to be reaped.
func stopGroup(pgid int, exited <-chan struct{}, grace time.Duration) {
	_ = termGroup(pgid)
	deadline := time.Now().Add(grace)
	for groupAlive(pgid) && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	_ = killGroup(pgid)
	select {
	case <-exited:
	case <-time.After(reapWait):
	}
}

// missingKeys returns the keys that environ does not set, reading names
// only.
func missingKeys(keys, environ []string) []string {
	set := make(map[string]bool, len(environ))
	for _, kv := range environ {
		if k, _, ok := strings.Cut(kv, "="); ok {
			set[k] = true
		}
	}
	var out []string
	for _, k := range keys {
		if !set[k] {
			out = append(out, k)
		}
	}
	return out
}

var unsafeName = regexp.MustCompile(`[^A-Za-z0-9._-]`)

// LogName returns the log file name Restart uses for a process name: the
// name with anything but letters, digits, '.', '_' and '-' replaced, and a
// short digest of the name appended whenever it had to be changed, so two
// names never share a log and no name can point outside the directory.
func LogName(name string) string {
	safe := unsafeName.ReplaceAllString(name, "_")
	if strings.HasPrefix(safe, ".") {
		safe = "_" + safe
	}
	if len(safe) > 64 {
		safe = safe[:64]
	}
	if safe != name {
		sum := sha256.Sum256([]byte(name))
		safe += "-" + hex.EncodeToString(sum[:4])
	}
	return safe + ".log"
}

// openLog creates dir (0700) and opens path for appending (0600), refusing
// a symlink or anything but a regular file.
func openLog(dir, path string) (*os.File, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("log directory: %w", err)
	}
	f, err := os.OpenFile(path, logOpenFlags, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open log: %w", err)
	}
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() {
		f.Close()
		if err == nil {
			err = errors.New("not a regular file")
		}
		return nil, fmt.Errorf("open log %s: %w", path, err)
	}
	return f, nil
}
