package engine

import (
	"context"
	"time"

	"github.com/cairn-dev/cairn/api"
	"github.com/cairn-dev/cairn/internal/layout"
	"github.com/cairn-dev/cairn/procs"
	"github.com/cairn-dev/cairn/session"
)

// maxRuntimeTimeout bounds the timeouts a caller may ask for.
const maxRuntimeTimeout = 5 * time.Minute

func clampTimeout(ms int64) (time.Duration, error) {
	d := time.Duration(ms) * time.Millisecond
	if ms < 0 || d > maxRuntimeTimeout {
		return 0, session.Errorf(session.CodeInvalidArgument, "timeout_ms %d is out of range (0 to %d)", ms, maxRuntimeTimeout.Milliseconds())
	}
	return d, nil
}

// latestRuntime returns the runtime record of the session's latest
// generation, rooted at the engine's workspace. It reads the session's
// head only: the runtime record comes without messages or artifacts.
func (e *Engine) latestRuntime(ctx context.Context, sessionID string) (*session.Runtime, error) {
	if err := e.checkSession(sessionID); err != nil {
		return nil, err
	}
	st, _, err := e.store.Head(ctx, sessionID)
	if err != nil {
		return nil, wrapStore("runtime", err)
	}
	rt := st.Snapshot.Runtime
	if rt == nil {
		rt = &session.Runtime{}
	}
	return procs.Rooted(rt, e.root), nil
}

// RuntimeCheck runs the health check of every process the session's latest
// generation records, now, and reports each preview with its process's
// state. It starts nothing.
func (e *Engine) RuntimeCheck(ctx context.Context, req api.RuntimeCheckRequest) (api.RuntimeCheckResult, error) {
	timeout, err := clampTimeout(req.TimeoutMS)
	if err != nil {
		return api.RuntimeCheckResult{}, err
	}
	rt, err := e.latestRuntime(ctx, req.SessionID)
	if err != nil {
		return api.RuntimeCheckResult{}, err
	}
	res := api.RuntimeCheckResult{Processes: procs.Probe(ctx, rt, timeout), Previews: []api.PreviewState{}}
	state := map[string]string{}
	for _, p := range res.Processes {
		state[p.Name] = p.State
	}
	for _, pv := range rt.Previews {
		s := procs.StateUnknown
		if v, ok := state[pv.Process]; ok {
			s = v
		}
		res.Previews = append(res.Previews, api.PreviewState{URL: pv.URL, Process: pv.Process, State: s})
	}
	return res, nil
}

// RuntimeRestart brings one recorded process back in the engine's process
// (so with its environment): it never starts a process whose health check
// passes, starts the recorded command detached in its cwd with output to
// <workspace>/.cairn/logs, and polls its health check until it passes or
// the timeout ends, when it kills what it started. A failure to come up is
// reported in the result (outcome "failed", error), not as an error: only
// an unknown session or process (not_found) or bad input is.
func (e *Engine) RuntimeRestart(ctx context.Context, req api.RuntimeRestartRequest) (api.RestartResult, error) {
	timeout, err := clampTimeout(req.TimeoutMS)
	if err != nil {
		return api.RestartResult{}, err
	}
	if req.Name == "" {
		return api.RestartResult{}, session.Errorf(session.CodeInvalidArgument, "runtime.restart: no process name")
	}
	if e.root == "" {
		return api.RestartResult{}, session.Errorf(session.CodeInvalidArgument, "this engine has no workspace directory to restart processes in")
	}
	rt, err := e.latestRuntime(ctx, req.SessionID)
	if err != nil {
		return api.RestartResult{}, err
	}
	p, ok := procs.Find(rt, req.Name)
	if !ok {
		return api.RestartResult{}, session.Errorf(session.CodeNotFound, "session %q records no process %q", req.SessionID, req.Name)
	}
	res, err := procs.Restart(ctx, p, procs.Options{LogDir: layout.Logs(e.root), Timeout: timeout})
	if err != nil && session.CodeOf(err) == session.CodeInvalidArgument {
		return res, err
	}
	return res, nil
}
