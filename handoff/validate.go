package handoff

import (
	"strings"

	"github.com/cairn-dev/cairn/session"
)

// Limits on a reviewed version.
const (
	// MinCommitLen and MaxCommitLen bound a commit id: an abbreviated git
	// id (7) up to a full SHA-256 object name (64), in hex.
	MinCommitLen = 7
	MaxCommitLen = 64
	// DiffDigestLen is the length of a diff_sha256 (hex SHA-256).
	DiffDigestLen = 64
)

// Validate reports whether the handoff record h is well formed. A nil
// record is valid (no handoff yet). It returns a *session.Error with code
// invalid_argument when next_step lacks its task or its done_when
// condition, or when reviewed_version holds neither a commit id (7 to 64
// hex digits) nor a diff_sha256 (64 hex digits), or holds a malformed one.
// It is cheap: no I/O, no allocation on success.
func Validate(h *session.Handoff) error {
	if h == nil {
		return nil
	}
	if ns := h.NextStep; ns != nil {
		if blank(ns.Task) {
			return session.Errorf(session.CodeInvalidArgument, "handoff.next_step has no task; a next step needs both task and done_when")
		}
		if blank(ns.DoneWhen) {
			return session.Errorf(session.CodeInvalidArgument, "handoff.next_step %q has no done_when; say what makes it done", clip(ns.Task))
		}
	}
	if rv := h.ReviewedVersion; rv != nil {
		if rv.Commit == "" && rv.DiffSHA256 == "" {
			return session.Errorf(session.CodeInvalidArgument, "handoff.reviewed_version holds neither a commit nor a diff_sha256")
		}
		if rv.Commit != "" && !isHex(rv.Commit, MinCommitLen, MaxCommitLen) {
			return session.Errorf(session.CodeInvalidArgument, "handoff.reviewed_version.commit %q is not a commit id (%d to %d hex digits)", clip(rv.Commit), MinCommitLen, MaxCommitLen)
		}
		if rv.DiffSHA256 != "" && !isHex(rv.DiffSHA256, DiffDigestLen, DiffDigestLen) {
			return session.Errorf(session.CodeInvalidArgument, "handoff.reviewed_version.diff_sha256 %q is not a SHA-256 digest (%d hex digits)", clip(rv.DiffSHA256), DiffDigestLen)
		}
	}
	return nil
}

// ValidateVerification reports whether every check of the report v has a
// status among passed, failed, skipped and not_run, with the same wording
// session.Normalize uses; an empty status is named as missing.
func ValidateVerification(v session.Verification) error {
	for _, ch := range v.Checks {
		switch ch.Status {
		case session.CheckPassed, session.CheckFailed, session.CheckSkipped, session.CheckNotRun:
		case "":
			return session.Errorf(session.CodeInvalidArgument, "verification %q: check %q has no status; want passed, failed, skipped or not_run", v.ID, ch.Name)
		default:
			return session.Errorf(session.CodeInvalidArgument, "verification %q: check %q has status %q; want passed, failed, skipped or not_run", v.ID, ch.Name, ch.Status)
		}
	}
	return nil
}

// ValidateChange applies Validate and ValidateVerification to what a
// commit carries: the handoff and verifications of a delta, or of the
// snapshot it replaces. It is meant to run right after session.Normalize.
func ValidateChange(c *session.Change) error {
	if c == nil {
		return nil
	}
	h, vs := c.Handoff, c.UpsertVerifications
	if c.Replace != nil {
		h, vs = c.Replace.Handoff, c.Replace.Verifications
	}
	if err := Validate(h); err != nil {
		return err
	}
	for _, v := range vs {
		if err := ValidateVerification(v); err != nil {
			return err
		}
	}
	return nil
}

func blank(s string) bool { return strings.TrimSpace(s) == "" }

func isHex(s string, lo, hi int) bool {
	if len(s) < lo || len(s) > hi {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
			return false
		}
	}
	return true
}

// clip shortens s for an error message.
func clip(s string) string {
	const max = 80
	if len(s) <= max {
		return s
	}
	return strings.ToValidUTF8(s[:max], "") + "…"
}
