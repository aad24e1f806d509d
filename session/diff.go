package session

import (
	"bytes"
	"encoding/json"
)

// Diff returns a delta that turns cur into next exactly as replacing cur
// with next would (session.Apply of either gives the same snapshot), and
// true; or nil and false when no delta can express it (a message, trace or
// artifact was changed or removed rather than appended; a run,
// verification or subagent task was removed or reordered; a record present
// in cur is absent from next).
//
// It lets a host that always saves its whole session pay for what it added,
// not for the whole session. It compares opaque messages byte for byte and
// other records through their JSON form, so a record that differs only in
// representation (a time zone, an omitted digest) is re-sent, never lost.
// Neither argument is modified; the delta shares next's values.
func Diff(cur, next *Snapshot) (*Change, bool) {
	c := &Change{SchemaVersion: next.SchemaVersion}
	if len(next.Messages) < len(cur.Messages) {
		return nil, false
	}
	for i, m := range cur.Messages {
		if !bytes.Equal(m, next.Messages[i]) {
			return nil, false
		}
	}
	c.AppendMessages = next.Messages[len(cur.Messages):]

	var ok bool
	if c.AppendTraces, ok = appended(cur.Traces, next.Traces); !ok {
		return nil, false
	}
	if c.AppendArtifacts, ok = appended(cur.Artifacts, next.Artifacts); !ok {
		return nil, false
	}
	if c.UpsertRuns, ok = upserted(cur.Runs, next.Runs, func(r Run) string { return r.RunID }); !ok {
		return nil, false
	}
	if c.UpsertVerifications, ok = upserted(cur.Verifications, next.Verifications, func(v Verification) string { return v.ID }); !ok {
		return nil, false
	}
	if c.UpsertSubagentTasks, ok = upserted(cur.SubagentTasks, next.SubagentTasks, func(t SubagentTask) string { return t.TaskID }); !ok {
		return nil, false
	}
	if c.Workspace, ok = replaced(cur.Workspace, next.Workspace); !ok {
		return nil, false
	}
	if c.Handoff, ok = replaced(cur.Handoff, next.Handoff); !ok {
		return nil, false
	}
	if c.Runtime, ok = replaced(cur.Runtime, next.Runtime); !ok {
		return nil, false
	}
	if c.Files, ok = replaced(cur.Files, next.Files); !ok {
		return nil, false
	}
	if !sameJSON(cur.Agent, next.Agent) {
		if next.Agent == nil {
			return nil, false
		}
		c.Agent = next.Agent
	}
	for k, v := range next.Metadata {
		if old, had := cur.Metadata[k]; !had || !bytes.Equal(old, v) {
			if c.Metadata == nil {
				c.Metadata = map[string]Value{}
			}
			c.Metadata[k] = v
		}
	}
	for k := range cur.Metadata {
		if _, kept := next.Metadata[k]; !kept {
			if c.Metadata == nil {
				c.Metadata = map[string]Value{}
			}
			c.Metadata[k] = Value("null")
		}
	}
	return c, true
}

func sameJSON(a, b any) bool {
	x, err1 := json.Marshal(a)
	y, err2 := json.Marshal(b)
	return err1 == nil && err2 == nil && bytes.Equal(x, y)
}

// appended returns next's items after cur's, which must be a prefix of it.
func appended[T any](cur, next []T) ([]T, bool) {
	if len(next) < len(cur) {
		return nil, false
	}
	for i := range cur {
		if !sameJSON(cur[i], next[i]) {
			return nil, false
		}
	}
	return next[len(cur):], true
}

// upserted returns the items of next to upsert into cur. cur's ids must
// start next in the same order (an upsert cannot remove or reorder).
func upserted[T any](cur, next []T, id func(T) string) ([]T, bool) {
	if len(next) < len(cur) {
		return nil, false
	}
	var out []T
	for i := range cur {
		if id(cur[i]) != id(next[i]) {
			return nil, false
		}
		if !sameJSON(cur[i], next[i]) {
			out = append(out, next[i])
		}
	}
	return append(out, next[len(cur):]...), true
}

// replaced returns next when it differs from cur. A record present in cur
// and absent from next cannot be expressed (nil means "unchanged").
func replaced[T any](cur, next *T) (*T, bool) {
	if sameJSON(cur, next) {
		return nil, true
	}
	if next == nil {
		return nil, false
	}
	return next, true
}
