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
	} else {
		st = CloneState(ms.latest())
	}
	Apply(st, id, c, cur+1, s.now())
	if ms == nil {
		ms = &memSession{}
		s.sessions[id] = ms
	}
	ms.history = append(ms.history, st)
	return CommitResult{Generation: cur + 1, MessageCount: int64(len(st.Snapshot.Messages))}, nil
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
