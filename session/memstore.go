package session

import (
	"context"
	"slices"
	"strings"
	"sync"
	"time"
)

// MemStore is an in-memory Store. It keeps every generation, so Load can go
// back in time, and is neither durable nor shared between processes. It
// exists for tests and embedders that want no disk; it passes the same
// contract tests as the file store.
type MemStore struct {
	mu        sync.Mutex
	closed    bool
	now       func() time.Time
	sessions  map[string]*memSession
	workflows map[string]*Workflow
}

type memSession struct {
	history []*State // history[i] is generation i+1
	// Of the latest generation: the generation that added each message
	// and each trace, and each run's kept checkpoints in commit order.
	msgGens, traceGens []uint64
	ckpts              map[string][]RunEvent
}

func (m *memSession) latest() *State { return m.history[len(m.history)-1] }

// NewMemStore returns an empty in-memory store.
func NewMemStore() *MemStore {
	return &MemStore{
		now:       time.Now,
		sessions:  map[string]*memSession{},
		workflows: map[string]*Workflow{},
	}
}

var errClosed = Errorf(CodeInternal, "store is closed")

// Capabilities reports an atomic, CAS-capable, non-durable store.
func (s *MemStore) Capabilities() Capabilities {
	return Capabilities{AtomicGenerations: true, DeltaCommits: true, CompareAndSwap: true, History: true}
}

// Commit applies c as the session's next generation, normalised first
// unless opts.Normalized says that is done.
func (s *MemStore) Commit(ctx context.Context, id string, c *Change, opts CommitOptions) (CommitResult, error) {
	if err := ValidateID("session", id); err != nil {
		return CommitResult{}, err
	}
	if !opts.Normalized {
		if err := Normalize(c); err != nil {
			return CommitResult{}, err
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return CommitResult{}, errClosed
	}
	ms := s.sessions[id]
	var cur uint64
	if ms != nil {
		cur = uint64(len(ms.history))
	}
	if err := CheckExpect(id, cur, opts); err != nil {
		return CommitResult{}, err
	}
	var st *State
	if ms == nil {
		st = &State{}
		ms = &memSession{ckpts: map[string][]RunEvent{}}
	} else {
		st = CloneState(ms.latest())
		if err := CheckEdits(id, c, int64(len(st.Snapshot.Messages)), func(a string) bool {
			return slices.ContainsFunc(st.Snapshot.Artifacts, func(x Artifact) bool { return x.ID == a })
		}); err != nil {
			return CommitResult{}, err
		}
	}
	gen := cur + 1
	Apply(st, id, c, gen, s.now())
	if cur == 0 {
		s.sessions[id] = ms
	}
	ms.history = append(ms.history, st)
	ms.track(c, st, gen)
	return CommitResult{Generation: gen, MessageCount: int64(len(st.Snapshot.Messages))}, nil
}

// track records what generation gen added, for the reads that need it.
func (ms *memSession) track(c *Change, st *State, gen uint64) {
	grow := func(gens []uint64, n int) []uint64 {
		for len(gens) < n {
			gens = append(gens, gen)
		}
		return gens
	}
	if c.Replace != nil {
		ms.msgGens, ms.traceGens = nil, nil
	}
	if c.TruncateMessages != nil && *c.TruncateMessages < int64(len(ms.msgGens)) {
		ms.msgGens = ms.msgGens[:*c.TruncateMessages:*c.TruncateMessages]
	}
	ms.msgGens = grow(ms.msgGens, len(st.Snapshot.Messages))
	ms.traceGens = grow(ms.traceGens, len(st.Snapshot.Traces))
	for _, run := range c.DropCheckpoints {
		delete(ms.ckpts, run)
	}
	recorded := make([]string, 0, len(c.RestoreCheckpoints)+1)
	for _, cp := range c.RestoreCheckpoints {
		recorded = append(recorded, cp.RunID)
	}
	if c.Checkpoint != nil {
		recorded = append(recorded, c.Checkpoint.RunID)
	}
	for _, run := range recorded {
		cp := *st.Checkpoints[run]
		ms.ckpts[run] = append(ms.ckpts[run], RunEvent{Kind: EventCheckpoint, Generation: gen, Checkpoint: &cp})
	}
}

// CheckExpect enforces CommitOptions against the current generation cur
// (0: the session does not exist). Every store calls it, so CAS reads the
// same everywhere.
func CheckExpect(id string, cur uint64, opts CommitOptions) error {
	if opts.MustNotExist && cur != 0 {
		return Errorf(CodeConflict, "session %q already exists (generation %d)", id, cur)
	}
	if opts.ExpectGeneration != nil && *opts.ExpectGeneration != cur {
		return Errorf(CodeConflict, "session %q is at generation %d, not the expected %d", id, cur, *opts.ExpectGeneration)
	}
	return nil
}

func (s *MemStore) get(id string) (*memSession, error) {
	if s.closed {
		return nil, errClosed
	}
	if err := ValidateID("session", id); err != nil {
		return nil, err
	}
	ms := s.sessions[id]
	if ms == nil {
		return nil, Errorf(CodeNotFound, "session %q not found", id)
	}
	return ms, nil
}

// Load returns a copy of the session at generation at (0: latest).
func (s *MemStore) Load(ctx context.Context, id string, at uint64) (*State, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ms, err := s.get(id)
	if err != nil {
		return nil, err
	}
	if at == 0 {
		return CloneState(ms.latest()), nil
	}
	if at > uint64(len(ms.history)) {
		return nil, Errorf(CodeNotFound, "session %q has no generation %d (latest is %d)", id, at, len(ms.history))
	}
	return CloneState(ms.history[at-1]), nil
}

// Stat describes the session.
func (s *MemStore) Stat(ctx context.Context, id string) (Summary, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ms, err := s.get(id)
	if err != nil {
		return Summary{}, err
	}
	return Summarize(ms.latest(), 0), nil
}

// Head returns the latest generation without messages, artifacts and
// traces.
func (s *MemStore) Head(ctx context.Context, id string) (*State, Summary, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ms, err := s.get(id)
	if err != nil {
		return nil, Summary{}, err
	}
	st := ms.latest()
	head := *st.Snapshot
	head.Messages, head.Artifacts, head.Traces = []Value{}, nil, nil
	out := CloneState(&State{Snapshot: &head, Checkpoints: st.Checkpoints})
	return out, Summarize(st, 0), nil
}

// Messages returns a page of the latest generation's messages.
func (s *MemStore) Messages(ctx context.Context, id string, q Query) (Page[Value], error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ms, err := s.get(id)
	if err != nil {
		return Page[Value]{}, err
	}
	since, _ := slices.BinarySearch(ms.msgGens, q.SinceGeneration+1)
	p, err := pageOf(ms.latest().Snapshot.Messages, uint64(len(ms.history)), q, int64(since), ValueSize)
	for i, m := range p.Items {
		p.Items[i] = cloneValue(m)
	}
	return p, err
}

// Traces returns a page of the latest generation's traces.
func (s *MemStore) Traces(ctx context.Context, id string, q Query) (Page[Trace], error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ms, err := s.get(id)
	if err != nil {
		return Page[Trace]{}, err
	}
	since, _ := slices.BinarySearch(ms.traceGens, q.SinceGeneration+1)
	p, err := pageOf(ms.latest().Snapshot.Traces, uint64(len(ms.history)), q, int64(since), TraceSize)
	for i := range p.Items {
		p.Items[i].Data = cloneValue(p.Items[i].Data)
	}
	return p, err
}

// Artifacts returns the named artifacts (all when ids is nil).
func (s *MemStore) Artifacts(ctx context.Context, id string, ids []string, withData bool) (Page[Artifact], error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ms, err := s.get(id)
	if err != nil {
		return Page[Artifact]{}, err
	}
	all := ms.latest().Snapshot.Artifacts
	p := Page[Artifact]{Generation: uint64(len(ms.history)), Total: int64(len(all)), Items: []Artifact{}}
	for _, a := range ids {
		if !slices.ContainsFunc(all, func(x Artifact) bool { return x.ID == a }) {
			return Page[Artifact]{}, Errorf(CodeNotFound, "session %q holds no artifact %q", id, a)
		}
	}
	for _, a := range all {
		if ids != nil && !slices.Contains(ids, a.ID) {
			continue
		}
		a = cloneArtifact(a)
		if !withData {
			a.Data = nil
		}
		p.Items = append(p.Items, a)
	}
	p.Next = int64(len(p.Items))
	return p, nil
}

// RunEvents returns a page of a run's traces and kept checkpoints.
func (s *MemStore) RunEvents(ctx context.Context, id, runID string, q Query) (Page[RunEvent], error) {
	if err := ValidateID("run", runID); err != nil {
		return Page[RunEvent]{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	ms, err := s.get(id)
	if err != nil {
		return Page[RunEvent]{}, err
	}
	var events []RunEvent
	for i, t := range ms.latest().Snapshot.Traces {
		if t.RunID == runID {
			t.Data = cloneValue(t.Data)
			events = append(events, RunEvent{Kind: EventTrace, Generation: ms.traceGens[i], Trace: &t})
		}
	}
	// A commit's traces come before its checkpoint, as in the commit.
	for _, ev := range ms.ckpts[runID] {
		cp := *ev.Checkpoint
		cp.State = cloneValue(cp.State)
		ev.Checkpoint = &cp
		at, _ := slices.BinarySearchFunc(events, ev.Generation+1, func(e RunEvent, g uint64) int { return cmpUint(e.Generation, g) })
		events = slices.Insert(events, at, ev)
	}
	since, _ := slices.BinarySearchFunc(events, q.SinceGeneration+1, func(e RunEvent, g uint64) int { return cmpUint(e.Generation, g) })
	return pageOf(events, uint64(len(ms.history)), q, int64(since), EventSize)
}

func cmpUint(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// Copy creates dst from src inside the store.
func (s *MemStore) Copy(ctx context.Context, src, dst string, at uint64, then *Change) (CommitResult, error) {
	if err := ValidateID("session", dst); err != nil {
		return CommitResult{}, err
	}
	st, err := s.Load(ctx, src, at)
	if err != nil {
		return CommitResult{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return CommitResult{}, errClosed
	}
	if s.sessions[dst] != nil {
		return CommitResult{}, CheckExpect(dst, uint64(len(s.sessions[dst].history)), CommitOptions{MustNotExist: true})
	}
	now := s.now()
	copied := &State{}
	snap := *st.Snapshot
	snap.CreatedAt = time.Time{} // a copy is a new session, created now
	Apply(copied, dst, &Change{Replace: &snap}, 1, now)
	ms := &memSession{ckpts: map[string][]RunEvent{}}
	ms.track(&Change{Replace: &snap}, copied, 1)
	if then != nil {
		Apply(copied, dst, then, 1, now)
		ms.track(then, copied, 1)
	}
	ms.history = []*State{copied}
	s.sessions[dst] = ms
	return CommitResult{Generation: 1, MessageCount: int64(len(copied.Snapshot.Messages))}, nil
}

// List describes every session, ordered by id.
func (s *MemStore) List(ctx context.Context) ([]Summary, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, errClosed
	}
	out := make([]Summary, 0, len(s.sessions))
	for _, ms := range s.sessions {
		out = append(out, Summarize(ms.latest(), 0))
	}
	slices.SortFunc(out, func(a, b Summary) int { return strings.Compare(a.SessionID, b.SessionID) })
	return out, nil
}

// Delete removes the session, its checkpoints and its workflows.
func (s *MemStore) Delete(ctx context.Context, id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, err := s.get(id); err != nil {
		return err
	}
	delete(s.sessions, id)
	for wid, w := range s.workflows {
		if w.SessionID == id {
			delete(s.workflows, wid)
		}
	}
	return nil
}

// FindRun returns the session that records runID.
func (s *MemStore) FindRun(ctx context.Context, runID string) (string, error) {
	if err := ValidateID("run", runID); err != nil {
		return "", err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return "", errClosed
	}
	for id, ms := range s.sessions {
		st := ms.latest()
		if st.Checkpoints[runID] != nil {
			return id, nil
		}
		for _, r := range st.Snapshot.Runs {
			if r.RunID == runID {
				return id, nil
			}
		}
	}
	return "", Errorf(CodeNotFound, "run %q not found", runID)
}

// Checkpoint returns the latest loop checkpoint of runID.
func (s *MemStore) Checkpoint(ctx context.Context, runID string) (*LoopCheckpoint, error) {
	if err := ValidateID("run", runID); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, errClosed
	}
	for _, ms := range s.sessions {
		if cp := ms.latest().Checkpoints[runID]; cp != nil {
			c := *cp
			c.State = cloneValue(cp.State)
			return &c, nil
		}
	}
	return nil, Errorf(CodeNoCheckpoint, "run %q has no checkpoint", runID)
}

// Workflow returns a copy of the workflow checkpoint.
func (s *MemStore) Workflow(ctx context.Context, id string) (*Workflow, error) {
	if err := ValidateID("workflow", id); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, errClosed
	}
	w := s.workflows[id]
	if w == nil {
		return nil, Errorf(CodeNotFound, "workflow %q not found", id)
	}
	return CloneWorkflow(w), nil
}

// Workflows returns copies of the workflows sessionID owns, by id.
func (s *MemStore) Workflows(ctx context.Context, sessionID string) ([]*Workflow, error) {
	if err := ValidateID("session", sessionID); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, errClosed
	}
	out := []*Workflow{}
	for _, w := range s.workflows {
		if w.SessionID == sessionID {
			out = append(out, CloneWorkflow(w))
		}
	}
	slices.SortFunc(out, func(a, b *Workflow) int { return strings.Compare(a.WorkflowID, b.WorkflowID) })
	return out, nil
}

// CloneWorkflow returns a deep copy of w.
func CloneWorkflow(w *Workflow) *Workflow {
	out := *w
	out.Steps = make([]StepRecord, len(w.Steps))
	for i, st := range w.Steps {
		st.Result = cloneValue(st.Result)
		out.Steps[i] = st
	}
	return &out
}

// ApplyStep records step in w, replacing an earlier record of the same step.
func ApplyStep(w *Workflow, step StepRecord) {
	step.Result = cloneValue(step.Result)
	w.Steps = upsert(w.Steps, step, func(x StepRecord) string { return x.StepID })
}

// SaveStep records a completed step.
func (s *MemStore) SaveStep(ctx context.Context, wid, sessionID string, step StepRecord) error {
	if err := NormalizeStep(wid, &step); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return errClosed
	}
	w := s.workflows[wid]
	if w == nil {
		w = &Workflow{SchemaVersion: SchemaVersion, WorkflowID: wid, SessionID: sessionID, Steps: []StepRecord{}}
		s.workflows[wid] = w
	}
	ApplyStep(w, step)
	return nil
}

// DeleteWorkflow removes the workflow checkpoint.
func (s *MemStore) DeleteWorkflow(ctx context.Context, id string) error {
	if err := ValidateID("workflow", id); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return errClosed
	}
	if s.workflows[id] == nil {
		return Errorf(CodeNotFound, "workflow %q not found", id)
	}
	delete(s.workflows, id)
	return nil
}

// Close marks the store closed.
func (s *MemStore) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	return nil
}
