package session

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/cairn-dev/cairn/internal/jsonscan"
)

// MaxIDBytes is the longest session, run, workflow, step or item id accepted.
const MaxIDBytes = 256

// ValidateID reports whether id is acceptable as an id of the given kind
// ("session", "run", ...): non-empty, at most MaxIDBytes bytes, valid UTF-8,
// no NUL. Ids are otherwise arbitrary text ("feature/x", "../x" and unicode
// are all fine); stores map them to storage names safely.
func ValidateID(kind, id string) error {
	switch {
	case id == "":
		return Errorf(CodeInvalidArgument, "%s id is empty", kind)
	case len(id) > MaxIDBytes:
		return Errorf(CodeInvalidArgument, "%s id is %d bytes; the limit is %d", kind, len(id), MaxIDBytes)
	case strings.IndexByte(id, 0) >= 0:
		return Errorf(CodeInvalidArgument, "%s id contains a NUL byte", kind)
	case !utf8.ValidString(id):
		return Errorf(CodeInvalidArgument, "%s id is not valid UTF-8", kind)
	}
	return nil
}

// CheckSchema rejects a schema version newer than this build understands.
// Zero means "current".
func CheckSchema(what string, v int) error {
	if v > SchemaVersion {
		return Errorf(CodeSchemaUnsupported, "%s has schema_version %d; this build reads up to %d", what, v, SchemaVersion)
	}
	if v < 0 {
		return Errorf(CodeInvalidArgument, "%s has negative schema_version %d", what, v)
	}
	return nil
}

// Normalize validates c and puts it in canonical form, in place: times in
// UTC, artifact digests and sizes filled in, what the secret rules drop
// (secrets.go) cut out of agent, metadata and artifact metadata. It returns ErrSchemaUnsupported for a future schema and
// ErrInvalidArgument for anything else it rejects; in both cases nothing must
// be written.
func Normalize(c *Change) error { return NormalizeKnown(c, nil) }

// NormalizeKnown is Normalize, except that the messages and the checkpoint
// state for which known reports true are not scanned again: known names
// values that code of this module validated with the same rules already
// (the engine validates a checkpoint's input before it looks the run up,
// and again when it commits). A nil known checks every value.
func NormalizeKnown(c *Change, known func(Value) bool) error {
	if c == nil {
		return Errorf(CodeInvalidArgument, "change is nil")
	}
	if err := CheckSchema("change", c.SchemaVersion); err != nil {
		return err
	}
	if c.Replace != nil {
		if c.HasDelta() {
			return Errorf(CodeInvalidArgument, "a change is either a whole snapshot (replace) or a delta, not both")
		}
		ids := make([]string, 0, len(c.RestoreCheckpoints))
		for i := range c.RestoreCheckpoints {
			cp := &c.RestoreCheckpoints[i]
			ids = append(ids, cp.RunID)
			if err := checkValue("checkpoint state", cp.State, false); err != nil {
				return err
			}
			if cp.Turn < 0 || cp.ToolCallsCount < 0 || cp.MessageCount < 0 || cp.MessageCount > int64(len(c.Replace.Messages)) {
				return Errorf(CodeInvalidArgument, "restored checkpoint of run %q: turn, tool_calls_count and message_count must be within the session", cp.RunID)
			}
			cp.CreatedAt = cp.CreatedAt.UTC()
		}
		if err := checkUnique("run", ids); err != nil {
			return err
		}
		return normalizeSnapshotInto(c, known)
	}
	if len(c.RestoreCheckpoints) > 0 {
		return Errorf(CodeInvalidArgument, "restored checkpoints come only with a whole snapshot")
	}
	return normalizeDelta(c, known)
}

func normalizeSnapshotInto(c *Change, known func(Value) bool) error {
	s := c.Replace
	if err := CheckSchema("snapshot", s.SchemaVersion); err != nil {
		return err
	}
	s.CreatedAt = s.CreatedAt.UTC()
	s.UpdatedAt = s.UpdatedAt.UTC()
	// Validate the snapshot's parts with the same rules as a delta.
	d := &Change{
		Workspace: s.Workspace, Agent: s.Agent, Metadata: s.Metadata,
		AppendMessages: s.Messages, AppendTraces: s.Traces, AppendArtifacts: s.Artifacts,
		UpsertRuns: s.Runs, UpsertVerifications: s.Verifications, UpsertSubagentTasks: s.SubagentTasks,
		Handoff: s.Handoff, Runtime: s.Runtime, Files: s.Files,
		Checkpoint: c.Checkpoint, DropCheckpoints: c.DropCheckpoints,
	}
	if err := normalizeDelta(d, known); err != nil {
		return err
	}
	// Metadata nulls mean "delete" in a delta; in a snapshot there is nothing
	// to delete, so drop them.
	for k, v := range s.Metadata {
		if isNull(v) {
			delete(s.Metadata, k)
		}
	}
	return nil
}

func isNull(v Value) bool { return strings.TrimSpace(string(v)) == "null" }

func checkValue(what string, v Value, required bool) error {
	if len(v) == 0 {
		if required {
			return Errorf(CodeInvalidArgument, "%s is empty; it must be a JSON value", what)
		}
		return nil
	}
	// JSON text is UTF-8 (RFC 8259 §8.1), and what is stored must export
	// as UTF-8: jsonscan checks both in one pass, several times faster than
	// json.Valid (every message of every commit goes through here); the
	// slow check only tells the two failures apart.
	if jsonscan.Valid(v) {
		return nil
	}
	if json.Valid(v) && !utf8.Valid(v) {
		return Errorf(CodeInvalidArgument, "%s is not valid JSON: it is not UTF-8", what)
	}
	return Errorf(CodeInvalidArgument, "%s is not valid JSON", what)
}

func checkUnique(kind string, ids []string) error {
	seen := make(map[string]bool, len(ids))
	for _, id := range ids {
		if err := ValidateID(kind, id); err != nil {
			return err
		}
		if seen[id] {
			return Errorf(CodeInvalidArgument, "%s id %q appears twice in one change", kind, id)
		}
		seen[id] = true
	}
	return nil
}

func normalizeDelta(c *Change, known func(Value) bool) error {
	ScrubMap(c.Agent, false)
	ScrubMap(c.Metadata, true)
	for k, v := range c.Agent {
		if err := checkValue("agent."+k, v, true); err != nil {
			return err
		}
	}
	for k, v := range c.Metadata {
		if err := checkValue("metadata."+k, v, true); err != nil {
			return err
		}
	}
	for i, m := range c.AppendMessages {
		if known != nil && len(m) > 0 && known(m) {
			continue
		}
		if err := checkValue("message", m, true); err != nil {
			return Errorf(CodeInvalidArgument, "messages[%d]: %s", i, err.(*Error).Message)
		}
	}
	for i := range c.AppendTraces {
		t := &c.AppendTraces[i]
		t.Time = t.Time.UTC()
		if err := checkValue("trace data", t.Data, false); err != nil {
			return err
		}
	}
	ids := make([]string, 0, len(c.AppendArtifacts)+len(c.PutArtifacts))
	for _, list := range [][]Artifact{c.AppendArtifacts, c.PutArtifacts} {
		for i := range list {
			if err := normalizeArtifact(&list[i]); err != nil {
				return err
			}
			ids = append(ids, list[i].ID)
		}
	}
	if err := checkUnique("artifact", ids); err != nil {
		return err
	}
	if err := checkUnique("artifact", c.DeleteArtifacts); err != nil {
		return err
	}
	if c.TruncateMessages != nil && *c.TruncateMessages < 0 {
		return Errorf(CodeInvalidArgument, "truncate_messages is %d; it must not be negative", *c.TruncateMessages)
	}
	ids = ids[:0]
	for i := range c.UpsertRuns {
		r := &c.UpsertRuns[i]
		ids = append(ids, r.RunID)
		switch r.Status {
		case RunRunning, RunCompleted, RunInterrupted, RunFailed:
		default:
			return Errorf(CodeInvalidArgument, "run %q: status %q is not one of running, completed, interrupted, failed", r.RunID, r.Status)
		}
		r.StartedAt = r.StartedAt.UTC()
		if r.EndedAt != nil {
			t := r.EndedAt.UTC()
			r.EndedAt = &t
		}
	}
	if err := checkUnique("run", ids); err != nil {
		return err
	}
	ids = ids[:0]
	for _, v := range c.UpsertVerifications {
		ids = append(ids, v.ID)
		for _, ch := range v.Checks {
			switch ch.Status {
			case CheckPassed, CheckFailed, CheckSkipped, CheckNotRun:
			default:
				return Errorf(CodeInvalidArgument, "verification %q: check %q has status %q; want passed, failed, skipped or not_run", v.ID, ch.Name, ch.Status)
			}
		}
	}
	if err := checkUnique("verification", ids); err != nil {
		return err
	}
	ids = ids[:0]
	for _, t := range c.UpsertSubagentTasks {
		ids = append(ids, t.TaskID)
		if err := checkValue("subagent task result", t.Result, false); err != nil {
			return err
		}
	}
	if err := checkUnique("subagent task", ids); err != nil {
		return err
	}
	if c.Runtime != nil {
		for _, p := range c.Runtime.Processes {
			if p.Name == "" {
				return Errorf(CodeInvalidArgument, "runtime process has no name")
			}
			for _, k := range p.EnvKeys {
				if k == "" || strings.ContainsAny(k, "=\x00") {
					return Errorf(CodeInvalidArgument, "runtime process %q: env_keys holds variable names only, got %q", p.Name, redactEnv(k))
				}
			}
		}
	}
	for _, id := range c.DropCheckpoints {
		if err := ValidateID("run", id); err != nil {
			return err
		}
	}
	if cp := c.Checkpoint; cp != nil {
		if err := ValidateID("run", cp.RunID); err != nil {
			return err
		}
		if known == nil || len(cp.State) == 0 || !known(cp.State) {
			if err := checkValue("checkpoint state", cp.State, false); err != nil {
				return err
			}
		}
		if cp.Turn < 0 || cp.ToolCallsCount < 0 {
			return Errorf(CodeInvalidArgument, "checkpoint turn and tool_calls_count must not be negative")
		}
		cp.CreatedAt = cp.CreatedAt.UTC()
	}
	return nil
}

// normalizeArtifact checks an artifact's metadata and fills in (or checks)
// the digest and size of its inline data.
func normalizeArtifact(a *Artifact) error {
	// Most artifacts have no metadata: the label is built only for one
	// that has (checkValue takes an empty optional value as it is).
	if len(a.Metadata) > 0 {
		if err := checkValue(fmt.Sprintf("artifact %q metadata", a.ID), a.Metadata, false); err != nil {
			return err
		}
		if out, drop := ScrubValue(a.Metadata); drop {
			a.Metadata = nil
		} else if out != nil {
			a.Metadata = out
		}
	}
	if a.Data == nil {
		return nil
	}
	sum := sha256.Sum256(a.Data)
	var hexSum [2 * sha256.Size]byte
	hex.Encode(hexSum[:], sum[:])
	if a.SHA256 != "" && !strings.EqualFold(a.SHA256, string(hexSum[:])) {
		return Errorf(CodeInvalidArgument, "artifact %q: sha256 %s does not match its data (%s)", a.ID, a.SHA256, string(hexSum[:]))
	}
	if a.Size != 0 && a.Size != int64(len(a.Data)) {
		return Errorf(CodeInvalidArgument, "artifact %q: size %d does not match its data (%d bytes)", a.ID, a.Size, len(a.Data))
	}
	if a.SHA256 != string(hexSum[:]) { // the digest is kept in lower case
		a.SHA256 = string(hexSum[:])
	}
	a.Size = int64(len(a.Data))
	return nil
}

// CheckEdits checks a normalised delta against the session it applies to:
// messages is its message count and has reports whether it holds an
// artifact id. Every store calls it before it writes, because these rules
// need the session: truncating past the end, appending an artifact id the
// session holds, and deleting one it does not hold are refused.
func CheckEdits(id string, c *Change, messages int64, has func(artifactID string) bool) error {
	if c.Replace != nil {
		return nil
	}
	if c.TruncateMessages != nil && *c.TruncateMessages > messages {
		return Errorf(CodeInvalidArgument, "session %q: truncate_messages %d is past its %d messages", id, *c.TruncateMessages, messages)
	}
	deleted := make(map[string]bool, len(c.DeleteArtifacts))
	for _, a := range c.DeleteArtifacts {
		if !has(a) {
			return Errorf(CodeNotFound, "session %q: delete_artifacts names artifact %q, which it does not hold", id, a)
		}
		deleted[a] = true
	}
	for _, a := range c.AppendArtifacts {
		if has(a.ID) && !deleted[a.ID] {
			return Errorf(CodeConflict, "session %q already holds artifact %q; append_artifacts only adds new ids (put_artifacts replaces)", id, a.ID)
		}
	}
	return nil
}

// redactEnv shows an offending env entry without its value.
func redactEnv(k string) string {
	if i := strings.IndexByte(k, '='); i >= 0 {
		return k[:i] + "=<redacted>"
	}
	return k
}

// NormalizeStep validates a workflow step record in place.
func NormalizeStep(workflowID string, st *StepRecord) error {
	if err := ValidateID("workflow", workflowID); err != nil {
		return err
	}
	if err := ValidateID("step", st.StepID); err != nil {
		return err
	}
	if st.Identity == "" {
		return Errorf(CodeInvalidArgument, "step %q has an empty identity", st.StepID)
	}
	if err := checkValue("step result", st.Result, false); err != nil {
		return err
	}
	if st.CompletedAt.IsZero() {
		st.CompletedAt = time.Now()
	}
	st.CompletedAt = st.CompletedAt.UTC()
	return nil
}
