package cli

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/cairn-dev/cairn/api"
	"github.com/cairn-dev/cairn/session"
)

func fmtTime(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.Local().Format("2006-01-02 15:04:05")
}

func renderList(w io.Writer, list []session.Summary) {
	if len(list) == 0 {
		fmt.Fprintln(w, "no sessions")
		return
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SESSION\tSTATE\tGEN\tMESSAGES\tRUNS\tCHECKPOINTS\tUPDATED")
	var sick []session.Summary
	for _, s := range list {
		state := "ok"
		if s.State != "" {
			state = s.State
			sick = append(sick, s)
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%s\t%d\t%s\n", s.SessionID, state, s.Generation, s.MessageCount, runCounts(s.Runs), s.Checkpoints, fmtTime(s.UpdatedAt))
	}
	tw.Flush()
	if len(sick) > 0 {
		fmt.Fprintf(w, "\n%d session(s) not served (GEN is the last generation that reads back intact):\n", len(sick))
		for _, s := range sick {
			fmt.Fprintf(w, "  %s: %s\n", s.SessionID, s.Problem)
		}
	}
}

func runCounts(m map[string]int) string {
	if len(m) == 0 {
		return "-"
	}
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, fmt.Sprintf("%d %s", m[k], k))
	}
	return strings.Join(parts, ", ")
}

func renderShow(w io.Writer, r *api.ResumeSessionResult) {
	s := r.Snapshot
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "session\t%s\n", s.SessionID)
	fmt.Fprintf(tw, "generation\t%d\n", r.Generation)
	fmt.Fprintf(tw, "created\t%s\n", fmtTime(s.CreatedAt))
	fmt.Fprintf(tw, "updated\t%s\n", fmtTime(s.UpdatedAt))
	if s.Workspace != nil {
		ws := s.Workspace.Root
		if s.Workspace.GitBranch != "" || s.Workspace.GitHead != "" {
			ws += fmt.Sprintf(" (git %s %s", s.Workspace.GitBranch, short(s.Workspace.GitHead))
			if s.Workspace.GitDirty {
				ws += ", dirty"
			}
			ws += ")"
		}
		fmt.Fprintf(tw, "workspace\t%s\n", ws)
	}
	if len(s.Agent) > 0 {
		fmt.Fprintf(tw, "agent\t%s\n", values(s.Agent))
	}
	if len(s.Metadata) > 0 {
		fmt.Fprintf(tw, "metadata\t%s\n", values(s.Metadata))
	}
	fmt.Fprintf(tw, "messages\t%d\n", len(s.Messages))
	fmt.Fprintf(tw, "runs\t%d (%d interrupted with a checkpoint)\n", len(s.Runs), len(r.InterruptedRuns))
	fmt.Fprintf(tw, "artifacts\t%d\n", len(s.Artifacts))
	fmt.Fprintf(tw, "traces\t%d\n", len(s.Traces))
	fmt.Fprintf(tw, "verifications\t%d\n", len(s.Verifications))
	fmt.Fprintf(tw, "subagent tasks\t%d\n", len(s.SubagentTasks))
	if h := s.Handoff; h != nil && h.NextStep != nil {
		fmt.Fprintf(tw, "next step\t%s\n", h.NextStep.Task)
	}
	tw.Flush()
}

// values renders a map of JSON values as k=v pairs in key order.
func values(m map[string]session.Value) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		v := strings.TrimSpace(string(m[k]))
		if len(v) > 60 {
			v = v[:60] + "…"
		}
		parts = append(parts, k+"="+v)
	}
	return strings.Join(parts, " ")
}

func short(h string) string {
	if len(h) > 12 {
		return h[:12]
	}
	return h
}

func renderRuns(w io.Writer, r *api.ResumeSessionResult) {
	runs := r.Snapshot.Runs
	if len(runs) == 0 {
		fmt.Fprintln(w, "no runs")
		return
	}
	cps := map[string]api.InterruptedRun{}
	for _, ir := range r.InterruptedRuns {
		cps[ir.RunID] = ir
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "RUN\tSTATUS\tPARENT\tSTARTED\tENDED\tTOKENS\tTOOL CALLS\tCHECKPOINT")
	for _, run := range runs {
		ended := "-"
		if run.EndedAt != nil {
			ended = fmtTime(*run.EndedAt)
		}
		cp := "-"
		if ir, ok := cps[run.RunID]; ok {
			cp = fmt.Sprintf("turn %d", ir.Turn)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\t%d\t%s\n", run.RunID, run.Status, orDash(run.ParentRunID),
			fmtTime(run.StartedAt), ended, run.Usage.TotalTokens, run.ToolCallsCount, cp)
	}
	tw.Flush()
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func list(w io.Writer, title string, items []string) {
	if len(items) == 0 {
		return
	}
	fmt.Fprintf(w, "  %s:\n", title)
	for _, it := range items {
		fmt.Fprintf(w, "    - %s\n", it)
	}
}

func renderResume(w io.Writer, r *api.ResumeSessionResult) {
	s := r.Snapshot
	fmt.Fprintf(w, "Session %s at generation %d: %d messages, %d runs.\n", s.SessionID, r.Generation, len(s.Messages), len(s.Runs))
	if len(r.InterruptedRuns) > 0 {
		fmt.Fprintln(w, "\nInterrupted runs (continue each with resumeRun; usage carries on):")
		for _, ir := range r.InterruptedRuns {
			fmt.Fprintf(w, "  %s: turn %d, %d messages at the boundary, %d tokens, %d tool calls, checkpointed %s\n",
				ir.RunID, ir.Turn, ir.MessageCount, ir.Usage.TotalTokens, ir.ToolCallsCount, fmtTime(ir.CheckpointedAt))
		}
	} else {
		fmt.Fprintln(w, "\nNo interrupted runs.")
	}
	if h := s.Handoff; h != nil {
		fmt.Fprintln(w, "\nHandoff:")
		list(w, "done", h.Done)
		list(w, "in progress", h.InProgress)
		list(w, "verified", h.Verified)
		list(w, "unverified", h.Unverified)
		list(w, "risks", h.Risks)
		list(w, "decisions pending", h.DecisionsPending)
		if h.NextStep != nil {
			fmt.Fprintf(w, "  next step: %s\n    done when: %s\n", h.NextStep.Task, h.NextStep.DoneWhen)
		}
		if rs := h.Restart; rs != nil {
			fmt.Fprintf(w, "  restart in %s:\n", orDash(rs.Workdir))
			for _, c := range rs.Commands {
				fmt.Fprintf(w, "    $ %s\n", c)
			}
			if rs.HealthCheck != "" {
				fmt.Fprintf(w, "    health check: %s\n", rs.HealthCheck)
			}
		}
		if rv := h.ReviewedVersion; rv != nil {
			fmt.Fprintf(w, "  reviewed version: %s %s\n", rv.VCS, rv.Commit)
		}
	} else {
		fmt.Fprintln(w, "\nNo handoff recorded.")
	}
	if rt := s.Runtime; rt != nil && (len(rt.Processes) > 0 || len(rt.Previews) > 0) {
		fmt.Fprintln(w, "\nRuntime (recorded, not running now; restart to use):")
		for _, p := range rt.Processes {
			fmt.Fprintf(w, "  %s: %s", p.Name, strings.Join(p.Command, " "))
			if p.Cwd != "" {
				fmt.Fprintf(w, " (in %s)", p.Cwd)
			}
			if p.Port != 0 {
				fmt.Fprintf(w, " port %d", p.Port)
			}
			fmt.Fprintln(w)
		}
		for _, p := range rt.Previews {
			fmt.Fprintf(w, "  preview %s (%s)\n", p.URL, orDash(p.Process))
		}
	}
	d := r.Drift
	switch {
	case !d.Tracked:
		fmt.Fprintf(w, "\nWorkspace drift: unknown (%s).\n", orDefault(d.Reason, "files are not tracked"))
	case len(d.Added)+len(d.Modified)+len(d.Deleted) == 0:
		fmt.Fprintln(w, "\nWorkspace drift: none since this generation.")
	default:
		fmt.Fprintf(w, "\nFiles changed since this session was saved: %s.\n", driftSummary(d))
		list(w, "added", d.Added)
		list(w, "modified", d.Modified)
		list(w, "deleted", d.Deleted)
	}
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// driftSummary says "3 modified, 1 deleted", naming only what is there.
func driftSummary(d api.Drift) string {
	var parts []string
	for _, p := range []struct {
		n    int
		kind string
	}{{len(d.Added), "added"}, {len(d.Modified), "modified"}, {len(d.Deleted), "deleted"}} {
		if p.n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", p.n, p.kind))
		}
	}
	return strings.Join(parts, ", ")
}
