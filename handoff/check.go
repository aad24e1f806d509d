package handoff

import (
	"github.com/cairn-dev/cairn/api"
	"github.com/cairn-dev/cairn/session"
)

// Keys of the parts a complete handoff needs, in the order Check reports
// them. They are stable: scripts and the CLI's --json output rely on them.
const (
	KeyResult          = "result"           // handoff.done says what was finished
	KeyVerification    = "verification"     // a verification report with at least one check
	KeyRestartPath     = "restart_path"     // handoff.restart with at least one command
	KeyReviewedVersion = "reviewed_version" // a commit id or a diff digest
	KeyRisks           = "risks_decisions"  // risks or decisions_pending ("none" is a statement)
	KeyNextStep        = "next_step"        // a task and its done_when condition
)

// Check lists what the latest generation s lacks to be a complete handoff,
// in a fixed order (result, verification, restart path, reviewed version,
// risks/decisions, next step). An empty list means nothing required is
// missing; it does not mean the work is correct. A nil snapshot lacks
// everything.
func Check(s *session.Snapshot) []api.HandoffMissing {
	var h session.Handoff
	var vs []session.Verification
	if s != nil {
		vs = s.Verifications
		if s.Handoff != nil {
			h = *s.Handoff
		}
	}
	var out []api.HandoffMissing
	add := func(key, msg string) { out = append(out, api.HandoffMissing{Key: key, Message: msg}) }
	if !anyText(h.Done) {
		add(KeyResult, "No result: handoff.done lists nothing that was finished.")
	}
	if !hasCheck(vs) {
		add(KeyVerification, "No verification: the session has no verification report with at least one check.")
	}
	if h.Restart == nil || !anyText(h.Restart.Commands) {
		add(KeyRestartPath, "No restart path: handoff.restart has no command to bring the work back.")
	}
	if rv := h.ReviewedVersion; rv == nil || Validate(&session.Handoff{ReviewedVersion: rv}) != nil {
		add(KeyReviewedVersion, "No reviewed version: handoff.reviewed_version names neither a commit id nor a diff digest.")
	}
	if !anyText(h.Risks) && !anyText(h.DecisionsPending) {
		add(KeyRisks, `No risks or decisions: record the open risks and pending decisions, or a risk "none" to say there are none.`)
	}
	if ns := h.NextStep; ns == nil || blank(ns.Task) || blank(ns.DoneWhen) {
		add(KeyNextStep, "No next step: handoff.next_step needs a task and the done_when condition that says it is done.")
	}
	return out
}

func anyText(items []string) bool {
	for _, it := range items {
		if !blank(it) {
			return true
		}
	}
	return false
}

func hasCheck(vs []session.Verification) bool {
	for _, v := range vs {
		if len(v.Checks) > 0 {
			return true
		}
	}
	return false
}
