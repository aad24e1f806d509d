package handoff

import (
	"strconv"
	"strings"
	"time"

	"github.com/cairn-dev/cairn/session"
)

// FileName is the name Render's output is written under at the workspace
// root.
const FileName = "HANDOFF.md"

// Files lists the workspace files changed during the session, from the
// workspace manifests. Tracked false means workspace tracking did not
// provide them, and Render says so instead of printing "no changes".
type Files struct {
	Tracked  bool     `json:"tracked"`
	Added    []string `json:"added,omitempty"`
	Modified []string `json:"modified,omitempty"`
	Deleted  []string `json:"deleted,omitempty"`
}

// Git is a reading of the workspace's repository.
type Git struct {
	Head   string `json:"head"`
	Branch string `json:"branch,omitempty"`
	Dirty  bool   `json:"dirty"`
}

// Input is the evidence Render works from.
type Input struct {
	// Snapshot is the session's latest generation. Required.
	Snapshot *session.Snapshot
	// Files are the files changed in the session per the workspace
	// manifests; the zero value means "not tracked".
	Files Files
	// Git, when set, is a live reading of the repository taken by the
	// caller; nil means the head and dirty state recorded with the
	// snapshot (snapshot.workspace) are used, and labelled as such.
	Git *Git
}

// Render returns HANDOFF.md for in: a summary, what is missing (Check),
// what changed, what is in progress, the verification reports with their
// exact commands and results, verified and unverified claims, the runs, the
// reviewed version against the git head, the restart path and recorded
// processes and previews, risks, pending decisions and the next step.
//
// It is deterministic: the output depends only on in. Lists keep the order
// the session recorded; file lists keep the order the caller gives.
//
// An item of handoff.verified is printed as verified only when a passed
// check backs it: the item equals the check's name or command (ignoring
// case, surrounding space and backticks) or contains the check's command,
// and that check's latest result (the last report in the snapshot's order
// that runs it) is passed. Any other verified item is printed under
// Unverified with the reason, as are handoff.unverified and every check
// whose latest result is failed, not_run or skipped.
func Render(in Input) []byte {
	s := in.Snapshot
	if s == nil {
		s = &session.Snapshot{}
	}
	h := s.Handoff
	if h == nil {
		h = &session.Handoff{}
	}
	var d doc
	r := renderer{d: &d, s: s, h: h, in: in}
	r.summary()
	r.missing()
	r.changed()
	r.inProgress()
	r.verification()
	r.runs()
	r.reviewed()
	r.restart()
	r.list("Risks", h.Risks, `No risks recorded. (A risk "none" states that there are none.)`)
	r.list("Decisions pending", h.DecisionsPending, "No decisions pending recorded.")
	r.nextStep()
	return d.Bytes()
}

type renderer struct {
	d  *doc
	s  *session.Snapshot
	h  *session.Handoff
	in Input
}

func fmtTime(t time.Time) string {
	if t.IsZero() {
		return "unknown"
	}
	return t.UTC().Format(time.RFC3339)
}

func (r *renderer) summary() {
	d, s := r.d, r.s
	id := s.SessionID
	if id == "" {
		id = "(no session id)"
	}
	d.line("# Handoff: %s", strings.ReplaceAll(id, "\n", " "))
	d.blank()
	d.line("Session %s, generation %d, updated %s.", code(s.SessionID), s.Generation, fmtTime(s.UpdatedAt))
	if ws := s.Workspace; ws != nil && ws.Root != "" {
		d.line("Workspace: %s.", code(ws.Root))
	}
	d.blank()
	d.line("Rendered by cairn from what the session recorded. Anything the session")
	d.line("cannot prove is listed as unverified, never as done.")
}

func (r *renderer) missing() {
	d := r.d
	d.heading(2, "Missing from this handoff")
	m := Check(r.s)
	if len(m) == 0 {
		d.line("Nothing required is missing: result, verification, restart path, reviewed")
		d.line("version, risks/decisions and next step are all recorded. (Recorded is not")
		d.line("the same as correct; read on.)")
		return
	}
	for _, x := range m {
		d.bullet(code(x.Key) + ": " + x.Message)
	}
}

func (r *renderer) changed() {
	d, h, f := r.d, r.h, r.in.Files
	d.heading(2, "What changed")
	if anyText(h.Done) {
		d.line("Done, as the session recorded it:")
		d.blank()
		for _, it := range h.Done {
			d.bullet(it)
		}
	} else {
		d.line("The session recorded nothing as done.")
	}
	d.blank()
	if !f.Tracked {
		d.line("Files changed: not tracked. Workspace tracking did not provide manifests for")
		d.line("this session, so the list above is the session's own account, not checked")
		d.line("against the tree.")
		return
	}
	n := len(f.Added) + len(f.Modified) + len(f.Deleted)
	if n == 0 {
		d.line("Files changed, per the workspace manifests: none.")
		return
	}
	d.line("Files changed, per the workspace manifests (%s):", plural(n, "file", "files"))
	d.blank()
	for _, g := range []struct {
		what  string
		paths []string
	}{{"added", f.Added}, {"modified", f.Modified}, {"deleted", f.Deleted}} {
		for _, p := range g.paths {
			d.bullet(g.what + " " + code(p))
		}
	}
}

func (r *renderer) inProgress() {
	d, h := r.d, r.h
	d.heading(2, "In progress")
	n := 0
	for _, it := range h.InProgress {
		if !blank(it) {
			d.bullet(it)
			n++
		}
	}
	for _, run := range r.s.Runs {
		if run.Status == session.RunRunning {
			d.bullet("run " + code(run.RunID) + " was still running when this generation was saved; its work is unfinished and unverified")
			n++
		}
	}
	if n == 0 {
		d.line("Nothing recorded as in progress.")
	}
}

// checkResult is the latest result of one check across the reports.
type checkResult struct {
	name, command, status, report string
}

func checkKey(c session.Check) string {
	if c.Name != "" {
		return "name:" + c.Name
	}
	return "cmd:" + c.Command
}

// latestChecks returns the latest result of each distinct check, in the
// order each check first appears.
func latestChecks(vs []session.Verification) []checkResult {
	idx := map[string]int{}
	var out []checkResult
	for _, v := range vs {
		for _, c := range v.Checks {
			k := checkKey(c)
			cr := checkResult{name: c.Name, command: c.Command, status: c.Status, report: v.ID}
			if i, ok := idx[k]; ok {
				out[i] = cr
				continue
			}
			idx[k] = len(out)
			out = append(out, cr)
		}
	}
	return out
}

func norm(s string) string {
	return strings.ToLower(strings.Trim(strings.TrimSpace(s), "`"))
}

// backing returns the check that item names, and whether it does.
func backing(item string, checks []checkResult) (checkResult, bool) {
	it := norm(item)
	if it == "" {
		return checkResult{}, false
	}
	for _, c := range checks {
		if c.name != "" && it == norm(c.name) {
			return c, true
		}
		if cmd := norm(c.command); cmd != "" && (it == cmd || strings.Contains(it, cmd)) {
			return c, true
		}
	}
	return checkResult{}, false
}

func statusText(st string) string {
	switch st {
	case session.CheckPassed:
		return "PASSED"
	case session.CheckFailed:
		return "FAILED"
	case session.CheckNotRun:
		return "NOT RUN"
	case session.CheckSkipped:
		return "SKIPPED"
	case "":
		return "NO STATUS"
	}
	return strings.ToUpper(st)
}

// verb says what happened to a check that did not pass.
func verb(status string) string {
	switch status {
	case session.CheckFailed:
		return "failed"
	case session.CheckNotRun:
		return "was not run"
	case session.CheckSkipped:
		return "was skipped"
	}
	return "has status " + code(status)
}

func checkLabel(c checkResult) string {
	if c.name != "" {
		return code(c.name)
	}
	return code(c.command)
}

func (r *renderer) verification() {
	d, s := r.d, r.s
	d.heading(2, "Verification")
	counts := map[string]int{}
	total := 0
	for _, v := range s.Verifications {
		total += len(v.Checks)
		for _, c := range v.Checks {
			counts[c.Status]++
		}
	}
	if len(s.Verifications) == 0 {
		d.line("No verification report: nothing in this session was checked.")
	} else {
		d.line("%s, %s: %d passed, %d failed, %d not run, %d skipped.",
			plural(len(s.Verifications), "report", "reports"), plural(total, "check", "checks"),
			counts[session.CheckPassed], counts[session.CheckFailed], counts[session.CheckNotRun], counts[session.CheckSkipped])
	}
	for _, v := range s.Verifications {
		title := "Report " + code(v.ID)
		if v.RunID != "" {
			title += " (run " + code(v.RunID) + ")"
		}
		d.heading(3, title)
		if !blank(v.Summary) {
			d.line("%s", indentRest(strings.TrimSpace(v.Summary), ""))
			d.blank()
		}
		if len(v.Checks) == 0 {
			d.line("This report holds no checks.")
			continue
		}
		for _, c := range v.Checks {
			name := c.Name
			if name == "" {
				name = "(unnamed check)"
			}
			d.bullet(statusText(c.Status) + " " + name)
			if c.Command != "" {
				d.bulletAt(1, "command: "+code(c.Command))
			} else {
				d.bulletAt(1, "command: not recorded")
			}
			if out, omitted := excerpt(c.Output); out != "" {
				label := "output:"
				if omitted > 0 {
					label = "output (last lines; " + plural(omitted, "earlier line", "earlier lines") + " omitted):"
				}
				d.bulletAt(1, label)
				d.blank()
				d.fence(2, "", out)
				d.blank()
			}
		}
	}
	r.claims()
}

func (r *renderer) claims() {
	d, h := r.d, r.h
	checks := latestChecks(r.s.Verifications)
	var verified, unverified []string
	for _, it := range h.Verified {
		it = strings.TrimSpace(it)
		if it == "" {
			continue
		}
		c, ok := backing(it, checks)
		switch {
		case !ok:
			unverified = append(unverified, it+" — recorded as verified, but no passed check backs it")
		case c.status == session.CheckPassed:
			verified = append(verified, it+" — check "+checkLabel(c)+" passed (report "+code(c.report)+")")
		default:
			unverified = append(unverified, it+" — recorded as verified, but check "+checkLabel(c)+" "+verb(c.status)+" in its latest report ("+code(c.report)+")")
		}
	}
	for _, it := range h.Unverified {
		if !blank(it) {
			unverified = append(unverified, it)
		}
	}
	for _, c := range checks {
		if c.status == session.CheckPassed {
			continue
		}
		line := "check " + checkLabel(c) + " " + verb(c.status) + " (report " + code(c.report) + ")"
		if c.name != "" && c.command != "" {
			line += ": " + code(c.command)
		}
		unverified = append(unverified, line)
	}
	d.heading(3, "Verified")
	if len(verified) == 0 {
		d.line("Nothing is verified by a passed check.")
	}
	for _, it := range verified {
		d.bullet(it)
	}
	d.heading(3, "Unverified")
	if len(unverified) == 0 {
		d.line("Nothing recorded as unverified.")
	}
	for _, it := range unverified {
		d.bullet(it)
	}
}

func (r *renderer) runs() {
	d, s := r.d, r.s
	d.heading(2, "Runs")
	if len(s.Runs) == 0 {
		d.line("No runs recorded.")
		return
	}
	var sum session.Usage
	var calls int64
	for _, run := range s.Runs {
		sum = sum.Add(run.Usage)
		calls += run.ToolCallsCount
		line := code(run.RunID) + " " + run.Status
		if run.ParentRunID != "" {
			line += " (resumed from " + code(run.ParentRunID) + ")"
		}
		line += ": " + usageText(run.Usage) + ", " + plural(int(run.ToolCallsCount), "tool call", "tool calls")
		line += "; started " + fmtTime(run.StartedAt)
		if run.EndedAt != nil {
			line += ", ended " + fmtTime(*run.EndedAt)
		}
		d.bullet(line)
	}
	d.blank()
	d.line("Total: %s, %s, %s.", plural(len(s.Runs), "run", "runs"), usageText(sum), plural(int(calls), "tool call", "tool calls"))
}

func usageText(u session.Usage) string {
	return strconv.FormatInt(u.TotalTokens, 10) + " tokens (" + strconv.FormatInt(u.InputTokens, 10) + " in, " +
		strconv.FormatInt(u.OutputTokens, 10) + " out), cost " + strconv.FormatFloat(u.Cost, 'f', -1, 64)
}

// sameCommit reports whether two commit ids name the same commit, allowing
// either to be abbreviated.
func sameCommit(a, b string) bool {
	a, b = strings.ToLower(a), strings.ToLower(b)
	if len(a) > len(b) {
		a, b = b, a
	}
	return len(a) >= MinCommitLen && strings.HasPrefix(b, a)
}

func (r *renderer) reviewed() {
	d, s, h := r.d, r.s, r.h
	d.heading(2, "Reviewed version")
	g, source := r.in.Git, "read now"
	if g == nil && s.Workspace != nil && s.Workspace.GitHead != "" {
		g = &Git{Head: s.Workspace.GitHead, Branch: s.Workspace.GitBranch, Dirty: s.Workspace.GitDirty}
		source = "recorded with this generation"
	}
	if g == nil || g.Head == "" {
		d.line("Git head: unknown (none recorded with this generation).")
	} else {
		line := "Git head (" + source + "): " + code(g.Head)
		if g.Branch != "" {
			line += " on branch " + code(g.Branch)
		}
		if g.Dirty {
			line += ", working tree dirty (uncommitted changes)."
		} else {
			line += ", working tree clean."
		}
		d.line("%s", line)
	}
	d.blank()
	rv := h.ReviewedVersion
	if rv == nil || (rv.Commit == "" && rv.DiffSHA256 == "") {
		d.line("No reviewed version recorded: nothing says which version was reviewed, so")
		d.line("treat the whole change as unreviewed.")
		return
	}
	var parts []string
	if rv.Commit != "" {
		vcs := rv.VCS
		if vcs == "" {
			vcs = "vcs unknown"
		}
		parts = append(parts, "commit "+code(rv.Commit)+" ("+vcs+")")
	}
	if rv.DiffSHA256 != "" {
		parts = append(parts, "diff sha256 "+code(rv.DiffSHA256))
	}
	d.line("Reviewed: %s.", strings.Join(parts, ", "))
	if err := Validate(&session.Handoff{ReviewedVersion: rv}); err != nil {
		d.blank()
		d.line("The reviewed version is malformed (%s); treat the change as unreviewed.", err.(*session.Error).Message)
		return
	}
	switch {
	case rv.Commit != "" && g != nil && g.Head != "" && !sameCommit(rv.Commit, g.Head):
		d.blank()
		d.line("**The reviewed commit %s is not the git head %s: the head, and whatever", code(rv.Commit), code(g.Head))
		d.line("changed since the reviewed commit, is unreviewed.**")
	case rv.Commit != "" && g != nil && g.Head != "" && g.Dirty && rv.DiffSHA256 == "":
		d.blank()
		d.line("The reviewed commit is the git head, but the working tree has uncommitted")
		d.line("changes that the review did not cover.")
	case rv.Commit != "" && g != nil && g.Head != "" && g.Dirty:
		d.blank()
		d.line("The reviewed commit is the git head and the working tree has uncommitted")
		d.line("changes; the review names a diff digest, but cairn cannot tell whether it")
		d.line("matches the uncommitted changes now.")
	case rv.Commit != "" && (g == nil || g.Head == ""):
		d.blank()
		d.line("The git head is unknown, so cairn cannot tell whether the reviewed commit is")
		d.line("still the version in the workspace.")
	case rv.Commit != "":
		d.blank()
		d.line("The reviewed commit is the git head, and the working tree is clean.")
	default:
		d.blank()
		d.line("Reviewed by content digest only; cairn cannot tell whether that digest")
		d.line("matches the workspace now.")
	}
}

func healthText(hc *session.HealthCheck) string {
	switch {
	case hc == nil || (len(hc.Command) == 0 && hc.URL == ""):
		return "none recorded"
	case hc.URL != "":
		st := hc.ExpectStatus
		if st == 0 {
			st = 200
		}
		return "GET " + code(hc.URL) + " answers " + strconv.Itoa(st)
	default:
		return code(argv(hc.Command)) + " exits " + strconv.Itoa(hc.ExpectExit)
	}
}

func (r *renderer) restart() {
	d, h, s := r.d, r.h, r.s
	d.heading(2, "Restart path")
	rs := h.Restart
	if rs == nil || (rs.Workdir == "" && !anyText(rs.Commands) && len(rs.Config) == 0 && rs.HealthCheck == "") {
		d.line("No restart path recorded.")
	} else {
		if rs.Workdir != "" {
			d.line("Workdir: %s", code(rs.Workdir))
		} else {
			d.line("Workdir: not recorded (the workspace root, presumably; unverified).")
		}
		d.blank()
		if anyText(rs.Commands) {
			d.line("Commands, in order:")
			d.blank()
			var cmds []string
			for _, c := range rs.Commands {
				if !blank(c) {
					cmds = append(cmds, strings.TrimRight(c, "\n"))
				}
			}
			d.fence(0, "sh", strings.Join(cmds, "\n"))
		} else {
			d.line("Commands: none recorded.")
		}
		d.blank()
		if len(rs.Config) > 0 {
			keys := make([]string, len(rs.Config))
			for i, k := range rs.Config {
				keys[i] = code(k)
			}
			d.line("Configuration needed (names only; values are never recorded): %s", strings.Join(keys, ", "))
		} else {
			d.line("Configuration needed: none recorded.")
		}
		d.blank()
		if rs.HealthCheck != "" {
			d.line("Health check: %s", code(rs.HealthCheck))
		} else {
			d.line("Health check: none recorded, so a restart cannot be proven.")
		}
	}
	rt := s.Runtime
	if rt == nil || (len(rt.Processes) == 0 && len(rt.Previews) == 0) {
		return
	}
	if len(rt.Processes) > 0 {
		d.heading(3, "Recorded processes")
		d.line("These processes were recorded by the session. They must be restarted; cairn")
		d.line("never assumes they survived (`cairn runtime ID` shows their state now).")
		d.blank()
		for _, p := range rt.Processes {
			line := code(p.Name) + ": " + code(argv(p.Command))
			if p.Cwd != "" {
				line += " in " + code(p.Cwd)
			}
			if p.Port != 0 {
				line += ", port " + strconv.Itoa(p.Port)
			}
			if len(p.EnvKeys) > 0 {
				keys := make([]string, len(p.EnvKeys))
				for i, k := range p.EnvKeys {
					keys[i] = code(k)
				}
				line += ", environment " + strings.Join(keys, ", ")
			}
			line += "; health check: " + healthText(p.HealthCheck)
			d.bullet(line)
		}
	}
	if len(rt.Previews) > 0 {
		d.heading(3, "Previews")
		d.line("Ephemeral URLs served by the processes above; they work only while their")
		d.line("process runs, and a preview is not a release.")
		d.blank()
		for _, p := range rt.Previews {
			line := code(p.URL)
			if p.Process != "" {
				line += " (process " + code(p.Process) + ")"
			}
			d.bullet(line)
		}
	}
}

func (r *renderer) list(title string, items []string, none string) {
	d := r.d
	d.heading(2, title)
	n := 0
	for _, it := range items {
		if !blank(it) {
			d.bullet(it)
			n++
		}
	}
	if n == 0 {
		d.line("%s", none)
	}
}

func (r *renderer) nextStep() {
	d, ns := r.d, r.h.NextStep
	d.heading(2, "Next step")
	if ns == nil || (blank(ns.Task) && blank(ns.DoneWhen)) {
		d.line("No next step recorded.")
		return
	}
	task, done := strings.TrimSpace(ns.Task), strings.TrimSpace(ns.DoneWhen)
	if task == "" {
		task = "(not recorded)"
	}
	if done == "" {
		done = "(not recorded: nothing says when this step is done)"
	}
	d.line("%s", "Task: "+indentRest(task, ""))
	d.blank()
	d.line("%s", "Done when: "+indentRest(done, ""))
}
