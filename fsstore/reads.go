package fsstore

import (
	"context"

	"github.com/cairn-dev/cairn/session"
)

// INTERIM: these reads replay the whole log; the indexed reads replace them.

func (s *Store) interim(ctx context.Context, id string) (*session.MemStore, *session.State, error) {
	st, err := s.Load(ctx, id, 0)
	if err != nil {
		return nil, nil, err
	}
	m := session.NewMemStore()
	_, err = m.Commit(ctx, id, &session.Change{Replace: st.Snapshot}, session.CommitOptions{})
	return m, st, err
}

// Head answers with the log's generation, updated_at and checkpoints (the
// interim memory store numbers its one generation 1, dates it now and has
// no checkpoints).
func (s *Store) Head(ctx context.Context, id string) (*session.State, session.Summary, error) {
	m, st, err := s.interim(ctx, id)
	if err != nil {
		return nil, session.Summary{}, err
	}
	head, sum, err := m.Head(ctx, id)
	if err != nil {
		return nil, sum, err
	}
	full := session.Summarize(st, 0)
	head.Snapshot.Generation, sum.Generation, sum.Checkpoints = st.Snapshot.Generation, st.Snapshot.Generation, full.Checkpoints
	head.Snapshot.UpdatedAt, sum.UpdatedAt = st.Snapshot.UpdatedAt, st.Snapshot.UpdatedAt
	head.Checkpoints = session.CloneState(&session.State{Snapshot: head.Snapshot, Checkpoints: st.Checkpoints}).Checkpoints
	return head, sum, nil
}

func (s *Store) Messages(ctx context.Context, id string, q session.Query) (session.Page[session.Value], error) {
	m, st, err := s.interim(ctx, id)
	if err != nil {
		return session.Page[session.Value]{}, err
	}
	p, err := m.Messages(ctx, id, q)
	p.Generation = st.Snapshot.Generation
	return p, err
}

func (s *Store) Traces(ctx context.Context, id string, q session.Query) (session.Page[session.Trace], error) {
	m, st, err := s.interim(ctx, id)
	if err != nil {
		return session.Page[session.Trace]{}, err
	}
	p, err := m.Traces(ctx, id, q)
	p.Generation = st.Snapshot.Generation
	return p, err
}

func (s *Store) Artifacts(ctx context.Context, id string, ids []string, withData bool) (session.Page[session.Artifact], error) {
	m, st, err := s.interim(ctx, id)
	if err != nil {
		return session.Page[session.Artifact]{}, err
	}
	p, err := m.Artifacts(ctx, id, ids, withData)
	p.Generation = st.Snapshot.Generation
	return p, err
}

func (s *Store) RunEvents(ctx context.Context, id, runID string, q session.Query) (session.Page[session.RunEvent], error) {
	m, _, err := s.interim(ctx, id)
	if err != nil {
		return session.Page[session.RunEvent]{}, err
	}
	return m.RunEvents(ctx, id, runID, q)
}

func (s *Store) Copy(ctx context.Context, src, dst string, at uint64, then *session.Change) (session.CommitResult, error) {
	st, err := s.Load(ctx, src, at)
	if err != nil {
		return session.CommitResult{}, err
	}
	if _, err := s.Stat(ctx, dst); err == nil {
		return session.CommitResult{}, session.CheckExpect(dst, 1, session.CommitOptions{MustNotExist: true})
	}
	m := session.NewMemStore()
	if _, err := m.Commit(ctx, src, &session.Change{Replace: st.Snapshot}, session.CommitOptions{}); err != nil {
		return session.CommitResult{}, err
	}
	if _, err := m.Copy(ctx, src, dst, 0, then); err != nil {
		return session.CommitResult{}, err
	}
	cp, err := m.Load(ctx, dst, 0)
	if err != nil {
		return session.CommitResult{}, err
	}
	return s.Commit(ctx, dst, &session.Change{Replace: cp.Snapshot}, session.CommitOptions{MustNotExist: true})
}
