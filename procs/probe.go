package procs

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/cairn-dev/cairn/api"
	"github.com/cairn-dev/cairn/session"
)

// Probe limits.
const (
	// DefaultProbeTimeout is the timeout callers should give Probe when
	// they have no better figure (resumeSession, `cairn runtime`).
	DefaultProbeTimeout = 2 * time.Second
	// maxConcurrentProbes bounds how many health checks run at once.
	maxConcurrentProbes = 16
	// maxBodyRead is how much of a health check's answer is read (and
	// discarded) so the connection closes cleanly.
	maxBodyRead = 64 << 10
	// healthCommandWaitDelay bounds how long a killed health command's
	// Wait may take.
	healthCommandWaitDelay = time.Second
)

// Probe runs the health check of every process of rt concurrently, each
// bounded by timeout (DefaultProbeTimeout when timeout <= 0), and returns
// their states in the order of rt.Processes. It never starts anything and
// never dials beyond loopback. A nil rt gives an empty list.
//
// Health command checks run directly (no shell) in the process's cwd with
// the current environment; make cwds absolute first (Rooted).
func Probe(ctx context.Context, rt *session.Runtime, timeout time.Duration) []api.ProcessState {
	if rt == nil || len(rt.Processes) == 0 {
		return []api.ProcessState{}
	}
	out := make([]api.ProcessState, len(rt.Processes))
	sem := make(chan struct{}, maxConcurrentProbes)
	var wg sync.WaitGroup
	for i, p := range rt.Processes {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			out[i] = ProbeProcess(ctx, p, timeout)
		}()
	}
	wg.Wait()
	return out
}

// ProbeProcess runs the health check of one process, bounded by timeout
// (DefaultProbeTimeout when timeout <= 0), and reports its state.
func ProbeProcess(ctx context.Context, p session.Process, timeout time.Duration) api.ProcessState {
	if timeout <= 0 {
		timeout = DefaultProbeTimeout
	}
	st, detail := check(ctx, p, nil, timeout)
	return api.ProcessState{Name: p.Name, State: st, Detail: detail}
}

// check runs p's health check once within timeout, with env (nil: the
// current environment) for a health command.
func check(ctx context.Context, p session.Process, env []string, timeout time.Duration) (state, detail string) {
	if err := validateHealth(p); err != nil {
		return StateUnknown, "cannot check: " + message(err)
	}
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	hc := p.HealthCheck
	switch {
	case hc != nil && hc.URL != "":
		state, detail = checkHTTP(cctx, hc)
	case hc != nil && len(hc.Command) > 0:
		state, detail = checkCommand(cctx, p, env)
	case p.Port > 0:
		switch open, d := portOpen(cctx, p.Port); {
		case open:
			return StateUnknown, fmt.Sprintf("port %d accepts connections, but no health check is recorded to say it is this process or that it is healthy", p.Port)
		case d != "":
			state, detail = StateUnknown, d
		default:
			return StateNotRunning, fmt.Sprintf("nothing listens on port %d (no health check recorded)", p.Port)
		}
	default:
		return StateUnknown, "no health check and no port recorded; cairn cannot tell whether it runs"
	}
	if ctx.Err() != nil && state != StateHealthy {
		return StateUnknown, "probe cancelled: " + detail
	}
	return state, detail
}

func message(err error) string {
	var se *session.Error
	if errors.As(err, &se) {
		return se.Message
	}
	return err.Error()
}

// dialHook, when set (by tests), sees every address the health check
// dialer is about to connect to.
var dialHook func(addr string)

// dialLoopback connects only to loopback addresses: a loopback IP literal
// as given, "localhost" as 127.0.0.1 then ::1 (no name lookup, so no hosts
// file or resolver can send it elsewhere). Anything else is refused with
// ErrNotLoopback before a socket is made.
func dialLoopback(ctx context.Context, network, addr string) (net.Conn, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	targets := []string{host}
	if strings.EqualFold(host, "localhost") {
		targets = []string{"127.0.0.1", "::1"}
	} else if !isLoopbackHost(host) {
		return nil, fmt.Errorf("%w: %s", ErrNotLoopback, addr)
	}
	var d net.Dialer
	var first error
	for _, h := range targets {
		a := net.JoinHostPort(h, port)
		if dialHook != nil {
			dialHook(a)
		}
		c, err := d.DialContext(ctx, "tcp", a)
		if err == nil {
			return c, nil
		}
		if first == nil {
			first = err
		}
		if ctx.Err() != nil {
			break
		}
	}
	return nil, first
}

// checkHTTP GETs the health URL once. The client uses no proxy, follows no
// redirect (a redirect could point off loopback) and keeps no connection.
func checkHTTP(ctx context.Context, hc *session.HealthCheck) (string, string) {
	u, err := ValidateURL(hc.URL)
	if err != nil {
		return StateUnknown, "refused: " + message(err)
	}
	want := hc.ExpectStatus
	if want == 0 {
		want = http.StatusOK
	}
	tr := &http.Transport{
		Proxy:             nil,
		DialContext:       dialLoopback,
		DisableKeepAlives: true,
		TLSClientConfig:   &tls.Config{MinVersion: tls.VersionTLS12},
	}
	defer tr.CloseIdleConnections()
	client := &http.Client{
		Transport:     tr,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	what := "GET " + u.String()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return StateUnknown, what + ": " + err.Error()
	}
	req.Header.Set("User-Agent", "cairn-health-check")
	resp, err := client.Do(req)
	if err != nil {
		return classifyNetErr(ctx, what, err)
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxBodyRead))
	resp.Body.Close()
	if resp.StatusCode != want {
		return StateUnhealthy, fmt.Sprintf("%s: status %d, want %d", what, resp.StatusCode, want)
	}
	return StateHealthy, fmt.Sprintf("%s: status %d", what, resp.StatusCode)
}

// classifyNetErr turns a failed health request into a state: refused or
// otherwise unconnectable is not_running, out of time is unhealthy
// (something may be there but it does not answer), anything after the
// connection was made is unhealthy.
func classifyNetErr(ctx context.Context, what string, err error) (string, string) {
	if ctx.Err() != nil {
		return StateUnhealthy, fmt.Sprintf("%s: no answer in time", what)
	}
	if errors.Is(err, ErrNotLoopback) {
		return StateUnknown, "refused: " + err.Error()
	}
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		return StateNotRunning, fmt.Sprintf("%s: %v", what, op.Err)
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	return StateUnhealthy, fmt.Sprintf("%s: %v", what, err)
}

// portOpen reports whether something accepts connections on the loopback
// port (127.0.0.1, then ::1). A non-empty detail means it could not tell.
func portOpen(ctx context.Context, port int) (bool, string) {
	c, err := dialLoopback(ctx, "tcp", net.JoinHostPort("localhost", strconv.Itoa(port)))
	if err == nil {
		c.Close()
		return true, ""
	}
	if ctx.Err() != nil {
		return false, fmt.Sprintf("port %d: no answer in time", port)
	}
	return false, ""
}

// checkCommand runs the health command once, directly, in p's cwd, in its
// own process group, which is killed if it outlives ctx. Its output is
// discarded: it could print anything, secrets included.
func checkCommand(ctx context.Context, p session.Process, env []string) (string, string) {
	hc := p.HealthCheck
	what := "health command " + strconv.Quote(strings.Join(hc.Command, " "))
	cmd := exec.CommandContext(ctx, hc.Command[0], hc.Command[1:]...)
	cmd.Dir = p.Cwd
	cmd.Env = env
	setGroup(cmd)
	cmd.Cancel = func() error { return killGroup(cmd.Process.Pid) }
	cmd.WaitDelay = healthCommandWaitDelay
	err := cmd.Run()
	code := 0
	var ee *exec.ExitError
	switch {
	case err == nil:
	case ctx.Err() != nil:
		return StateUnhealthy, what + ": did not finish in time"
	case errors.As(err, &ee) && ee.Exited():
		code = ee.ExitCode()
	case errors.As(err, &ee):
		return StateUnhealthy, fmt.Sprintf("%s: %v", what, ee)
	default:
		return StateUnknown, fmt.Sprintf("%s cannot run: %v", what, err)
	}
	if code == hc.ExpectExit {
		return StateHealthy, fmt.Sprintf("%s exited %d", what, code)
	}
	if p.Port > 0 {
		if open, d := portOpen(ctx, p.Port); !open && d == "" {
			return StateNotRunning, fmt.Sprintf("%s exited %d, want %d, and nothing listens on port %d", what, code, hc.ExpectExit, p.Port)
		}
	}
	return StateUnhealthy, fmt.Sprintf("%s exited %d, want %d", what, code, hc.ExpectExit)
}
