package cli

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/cairn-dev/cairn/api"
	"github.com/cairn-dev/cairn/handoff"
	"github.com/cairn-dev/cairn/internal/atomicfile"
	"github.com/cairn-dev/cairn/internal/layout"
	"github.com/cairn-dev/cairn/procs"
	"github.com/cairn-dev/cairn/protocol"
	"github.com/cairn-dev/cairn/session"
)

// errIncomplete makes `handoff --check` exit 1 after it has listed what is
// missing.
var errIncomplete = errors.New("the handoff is incomplete")

// handoffCmd prints HANDOFF.md (or writes it with --write, or checks it
// with --check).
func (e *env) handoffCmd(id string) error {
	if e.write && e.check {
		return fmt.Errorf("%w: handoff takes --write or --check, not both", errUsage)
	}
	c, err := e.connect()
	if err != nil {
		return err
	}
	defer c.Close()
	h, err := c.Handoff(e.ctx, id)
	if err != nil {
		return err
	}
	switch {
	case e.check:
		if e.json {
			if err := e.printJSON(map[string]any{"session_id": id, "complete": h.Complete, "missing": h.Missing}); err != nil {
				return err
			}
		} else if h.Complete {
			fmt.Fprintf(e.stdout, "handoff of %s is complete\n", id)
		} else {
			fmt.Fprintf(e.stdout, "handoff of %s is missing:\n", id)
			for _, m := range h.Missing {
				fmt.Fprintf(e.stdout, "  %s: %s\n", m.Key, m.Message)
			}
		}
		if !h.Complete {
			return errIncomplete
		}
		return nil
	case e.write:
		root, err := protocol.Workspace(e.workspace)
		if err != nil {
			return err
		}
		path := filepath.Join(root, handoff.FileName)
		// 0644: HANDOFF.md is meant to be read and committed.
		if err := atomicfile.WriteFile(path, []byte(h.Markdown), 0o644); err != nil {
			return fmt.Errorf("handoff --write: %w", err)
		}
		if e.json {
			return e.printJSON(map[string]any{"session_id": id, "path": path, "complete": h.Complete, "missing": h.Missing})
		}
		fmt.Fprintf(e.stdout, "wrote %s\n", path)
		return nil
	case e.json:
		return e.printJSON(h)
	}
	_, err = fmt.Fprint(e.stdout, h.Markdown)
	return err
}

// runtimeCmd lists the recorded processes with their live state, or (with
// --restart NAME) brings one back: in this process, so with the caller's
// environment.
func (e *env) runtimeCmd(id string) error {
	c, err := e.connect()
	if err != nil {
		return err
	}
	defer c.Close()
	if e.restart == "" {
		res, err := c.RuntimeCheck(e.ctx, api.RuntimeCheckRequest{SessionID: id, TimeoutMS: e.timeout.Milliseconds()})
		if err != nil {
			return err
		}
		if e.json {
			return e.printJSON(map[string]any{"session_id": id, "processes": res.Processes, "previews": res.Previews})
		}
		renderRuntime(e, res)
		return nil
	}
	r, err := c.ResumeSession(e.ctx, id)
	if err != nil {
		return err
	}
	root, err := protocol.Workspace(e.workspace)
	if err != nil {
		return err
	}
	recorded := r.Snapshot.Runtime
	if recorded == nil {
		recorded = &session.Runtime{}
	}
	p, ok := procs.Find(procs.Rooted(recorded, root), e.restart)
	if !ok {
		return session.Errorf(session.CodeNotFound, "session %q records no process %q", id, e.restart)
	}
	res, rerr := procs.Restart(e.ctx, p, procs.Options{LogDir: layout.Logs(root), Timeout: e.timeout})
	if e.json {
		if err := e.printJSON(res); err != nil {
			return err
		}
	} else {
		renderRestart(e, res)
	}
	if rerr != nil {
		return &printedError{err: fmt.Errorf("restart %s: %w", e.restart, rerr),
			plain: "restart " + e.restart + ": " + strings.TrimPrefix(strings.TrimPrefix(rerr.Error(), fmt.Sprintf("procs.Restart %q: ", e.restart)), "procs: ")}
	}
	return nil
}

func renderRuntime(e *env, res api.RuntimeCheckResult) {
	if len(res.Processes) == 0 {
		fmt.Fprintln(e.stdout, "no recorded processes")
	} else {
		tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "PROCESS\tSTATE\tDETAIL")
		for _, p := range res.Processes {
			fmt.Fprintf(tw, "%s\t%s\t%s\n", p.Name, p.State, orDash(p.Detail))
		}
		tw.Flush()
	}
	for _, pv := range res.Previews {
		fmt.Fprintf(e.stdout, "preview %s (%s): %s\n", pv.URL, orDash(pv.Process), pv.State)
	}
}

func renderRestart(e *env, r api.RestartResult) {
	switch r.Outcome {
	case procs.OutcomeAlreadyHealthy:
		fmt.Fprintf(e.stdout, "%s is already healthy; nothing started (%s)\n", r.Name, r.Detail)
	case procs.OutcomeStarted:
		fmt.Fprintf(e.stdout, "%s started (pid %d) and is %s after %s: %s\n", r.Name, r.PID, r.State, time.Duration(r.TookMS)*time.Millisecond, r.Detail)
	default:
		fmt.Fprintf(e.stdout, "%s did not come up: %s\n", r.Name, orDash(r.Error))
	}
	if r.Log != "" {
		fmt.Fprintf(e.stdout, "log: %s\n", r.Log)
	}
	if len(r.MissingEnv) > 0 {
		fmt.Fprintf(e.stdout, "not set in this environment: %v\n", r.MissingEnv)
	}
}
