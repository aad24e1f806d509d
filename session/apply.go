package session

import (
	"bytes"
	"slices"
	"time"
)

// Apply turns st into the next generation by applying c. It is the single
// definition of commit semantics: every store applies (or replays) commits
// through it. c must have passed Normalize. Apply copies what it keeps, so
// the caller may reuse c afterwards.
func Apply(st *State, sessionID string, c *Change, gen uint64, now time.Time) {
	now = now.UTC()
	if c.Replace != nil {
		created := now
		if st.Snapshot != nil {
			created = st.Snapshot.CreatedAt
		} else if !c.Replace.CreatedAt.IsZero() {
			created = c.Replace.CreatedAt
		}
		st.Snapshot = CloneSnapshot(c.Replace)
		st.Snapshot.CreatedAt = created
	}
	if st.Snapshot == nil {
		st.Snapshot = &Snapshot{CreatedAt: now}
	}
	s := st.Snapshot
	s.SchemaVersion = SchemaVersion
	s.SessionID = sessionID
	s.Generation = gen
	s.UpdatedAt = now
	if s.Messages == nil {
		s.Messages = []Value{}
	}

	if c.Workspace != nil {
		w := *c.Workspace
		s.Workspace = &w
	}
	if c.Agent != nil {
		s.Agent = cloneValueMap(c.Agent)
	}
	for k, v := range c.Metadata {
		if bytes.Equal(bytes.TrimSpace(v), []byte("null")) {
			delete(s.Metadata, k)
			continue
		}
		if s.Metadata == nil {
			s.Metadata = map[string]Value{}
		}
		s.Metadata[k] = cloneValue(v)
	}
	if c.TruncateMessages != nil && *c.TruncateMessages < int64(len(s.Messages)) {
		s.Messages = s.Messages[:*c.TruncateMessages:*c.TruncateMessages]
	}
	for _, m := range c.AppendMessages {
		s.Messages = append(s.Messages, cloneValue(m))
	}
	for _, t := range c.AppendTraces {
		t.Data = cloneValue(t.Data)
		s.Traces = append(s.Traces, t)
	}
	for _, id := range c.DeleteArtifacts {
		s.Artifacts = slices.DeleteFunc(s.Artifacts, func(a Artifact) bool { return a.ID == id })
	}
	// An appended id the session holds already can only come from a log
	// written before appends were checked: it replaces the earlier one, so
	// such a session still reads, forks and exports with unique ids.
	for _, a := range c.AppendArtifacts {
		s.Artifacts = upsert(s.Artifacts, cloneArtifact(a), artifactID)
	}
	for _, a := range c.PutArtifacts {
		s.Artifacts = upsert(s.Artifacts, cloneArtifact(a), artifactID)
	}
	for _, r := range c.UpsertRuns {
		s.Runs = upsert(s.Runs, cloneRun(r), func(x Run) string { return x.RunID })
	}
	for _, v := range c.UpsertVerifications {
		s.Verifications = upsert(s.Verifications, cloneVerification(v), func(x Verification) string { return x.ID })
	}
	for _, t := range c.UpsertSubagentTasks {
		t.Result = cloneValue(t.Result)
		s.SubagentTasks = upsert(s.SubagentTasks, t, func(x SubagentTask) string { return x.TaskID })
	}
	if c.Handoff != nil {
		s.Handoff = cloneHandoff(c.Handoff)
	}
	if c.Runtime != nil {
		s.Runtime = cloneRuntime(c.Runtime)
	}
	if c.Files != nil {
		f := *c.Files
		s.Files = &f
	}

	for _, id := range c.DropCheckpoints {
		delete(st.Checkpoints, id)
	}
	for _, cp := range c.RestoreCheckpoints {
		cp.SessionID = sessionID
		cp.State = cloneValue(cp.State)
		if cp.Files != nil {
			f := *cp.Files
			cp.Files = &f
		}
		if st.Checkpoints == nil {
			st.Checkpoints = map[string]*LoopCheckpoint{}
		}
		st.Checkpoints[cp.RunID] = &cp
	}
	if c.Checkpoint != nil {
		cp := *c.Checkpoint
		cp.SessionID = sessionID
		cp.MessageCount = int64(len(s.Messages))
		cp.State = cloneValue(cp.State)
		if cp.Files != nil {
			f := *cp.Files
			cp.Files = &f
		}
		if cp.CreatedAt.IsZero() {
			cp.CreatedAt = now
		}
		if st.Checkpoints == nil {
			st.Checkpoints = map[string]*LoopCheckpoint{}
		}
		st.Checkpoints[cp.RunID] = &cp
	}
}

func artifactID(a Artifact) string { return a.ID }

func upsert[T any](list []T, v T, key func(T) string) []T {
	k := key(v)
	for i := range list {
		if key(list[i]) == k {
			list[i] = v
			return list
		}
	}
	return append(list, v)
}

func cloneValue(v Value) Value {
	if v == nil {
		return nil
	}
	return append(Value(nil), v...)
}

func cloneValueMap(m map[string]Value) map[string]Value {
	if m == nil {
		return nil
	}
	out := make(map[string]Value, len(m))
	for k, v := range m {
		out[k] = cloneValue(v)
	}
	return out
}

func cloneStrings(s []string) []string {
	if s == nil {
		return nil
	}
	return append([]string(nil), s...)
}

func cloneArtifact(a Artifact) Artifact {
	if a.Data != nil {
		a.Data = append([]byte(nil), a.Data...)
	}
	a.Metadata = cloneValue(a.Metadata)
	return a
}

func cloneRun(r Run) Run {
	if r.EndedAt != nil {
		t := *r.EndedAt
		r.EndedAt = &t
	}
	return r
}

func cloneVerification(v Verification) Verification {
	v.Checks = append([]Check(nil), v.Checks...)
	return v
}

func cloneHandoff(h *Handoff) *Handoff {
	if h == nil {
		return nil
	}
	out := *h
	out.Done = cloneStrings(h.Done)
	out.InProgress = cloneStrings(h.InProgress)
	out.Verified = cloneStrings(h.Verified)
	out.Unverified = cloneStrings(h.Unverified)
	out.Risks = cloneStrings(h.Risks)
	out.DecisionsPending = cloneStrings(h.DecisionsPending)
	if h.Restart != nil {
		r := *h.Restart
		r.Commands = cloneStrings(r.Commands)
		r.Config = cloneStrings(r.Config)
		out.Restart = &r
	}
	if h.ReviewedVersion != nil {
		rv := *h.ReviewedVersion
		out.ReviewedVersion = &rv
	}
	if h.NextStep != nil {
		ns := *h.NextStep
		out.NextStep = &ns
	}
	return &out
}

func cloneRuntime(r *Runtime) *Runtime {
	if r == nil {
		return nil
	}
	out := &Runtime{}
	for _, p := range r.Processes {
		p.Command = cloneStrings(p.Command)
		p.EnvKeys = cloneStrings(p.EnvKeys)
		if p.HealthCheck != nil {
			hc := *p.HealthCheck
			hc.Command = cloneStrings(hc.Command)
			p.HealthCheck = &hc
		}
		out.Processes = append(out.Processes, p)
	}
	out.Previews = append([]Preview(nil), r.Previews...)
	return out
}

// CloneSnapshot returns a deep copy of s.
func CloneSnapshot(s *Snapshot) *Snapshot {
	if s == nil {
		return nil
	}
	out := *s
	if s.Workspace != nil {
		w := *s.Workspace
		out.Workspace = &w
	}
	out.Agent = cloneValueMap(s.Agent)
	out.Metadata = cloneValueMap(s.Metadata)
	out.Messages = make([]Value, len(s.Messages))
	for i, m := range s.Messages {
		out.Messages[i] = cloneValue(m)
	}
	out.Artifacts = nil
	for _, a := range s.Artifacts {
		out.Artifacts = append(out.Artifacts, cloneArtifact(a))
	}
	out.Traces = nil
	for _, t := range s.Traces {
		t.Data = cloneValue(t.Data)
		out.Traces = append(out.Traces, t)
	}
	out.Runs = nil
	for _, r := range s.Runs {
		out.Runs = append(out.Runs, cloneRun(r))
	}
	out.Verifications = nil
	for _, v := range s.Verifications {
		out.Verifications = append(out.Verifications, cloneVerification(v))
	}
	out.SubagentTasks = nil
	for _, t := range s.SubagentTasks {
		t.Result = cloneValue(t.Result)
		out.SubagentTasks = append(out.SubagentTasks, t)
	}
	out.Handoff = cloneHandoff(s.Handoff)
	out.Runtime = cloneRuntime(s.Runtime)
	if s.Files != nil {
		f := *s.Files
		out.Files = &f
	}
	return &out
}

// CloneState returns a deep copy of st.
func CloneState(st *State) *State {
	out := &State{Snapshot: CloneSnapshot(st.Snapshot)}
	if st.Checkpoints != nil {
		out.Checkpoints = make(map[string]*LoopCheckpoint, len(st.Checkpoints))
		for k, cp := range st.Checkpoints {
			c := *cp
			c.State = cloneValue(cp.State)
			out.Checkpoints[k] = &c
		}
	}
	return out
}

// Summarize describes st, with size as the store reports it.
func Summarize(st *State, size int64) Summary {
	s := st.Snapshot
	sum := Summary{
		SessionID:     s.SessionID,
		Generation:    s.Generation,
		CreatedAt:     s.CreatedAt,
		UpdatedAt:     s.UpdatedAt,
		MessageCount:  int64(len(s.Messages)),
		ArtifactCount: int64(len(s.Artifacts)),
		TraceCount:    int64(len(s.Traces)),
		Checkpoints:   len(st.Checkpoints),
		SizeBytes:     size,
		LiveBytes:     jsonSize(s),
	}
	for _, r := range s.Runs {
		if sum.Runs == nil {
			sum.Runs = map[string]int{}
		}
		sum.Runs[r.Status]++
	}
	return sum
}
