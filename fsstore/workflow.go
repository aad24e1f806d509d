package fsstore

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/cairn-dev/cairn/internal/atomicfile"
	"github.com/cairn-dev/cairn/internal/recordlog"
	"github.com/cairn-dev/cairn/session"
)

// Workflow logs are small (one record per completed step) and are not
// compacted: a step recorded again supersedes its earlier record on replay.

func (s *Store) loadWorkflow(name string) error {
	l, groups, err := s.openLog(s.flowsDir, name)
	if err != nil || l == nil {
		return err
	}
	w := &session.Workflow{SchemaVersion: session.SchemaVersion, Steps: []session.StepRecord{}}
	for _, g := range groups {
		for _, r := range g.records {
			if err := applyWorkflowRecord(w, r); err != nil {
				l.Close()
				s.unreadable[name] = err
				s.log.Error("workflow log cannot be read; leaving it untouched", "path", filepath.Join(s.flowsDir, name), "error", err)
				return nil
			}
		}
	}
	if name != fileName(w.WorkflowID) {
		l.Close()
		return session.Errorf(session.CodeInternal, "%s holds workflow %q, whose file would be %s", name, w.WorkflowID, fileName(w.WorkflowID))
	}
	s.workflows[w.WorkflowID] = &workflowFile{name: name, log: l, gen: groups[len(groups)-1].commit.Generation, w: w}
	return nil
}

func applyWorkflowRecord(w *session.Workflow, r recordlog.Record) error {
	switch r.Kind {
	case kindOwner:
		var o ownerRec
		if err := decMode.Unmarshal(r.Payload, &o); err != nil {
			return session.Wrap(session.CodeInternal, err, "decode owner record")
		}
		w.WorkflowID, w.SessionID = o.WorkflowID, o.SessionID
	case kindStep:
		var st session.StepRecord
		if err := decMode.Unmarshal(r.Payload, &st); err != nil {
			return session.Wrap(session.CodeInternal, err, "decode step record")
		}
		session.ApplyStep(w, st)
	default:
		return errUnknownKind(r.Kind)
	}
	return nil
}

func (s *Store) workflow(id string, create bool) (*workflowFile, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, errClosed
	}
	wf := s.workflows[id]
	if wf == nil {
		name := fileName(id)
		if err := s.unreadable[name]; err != nil {
			return nil, err
		}
		if !create {
			return nil, session.Errorf(session.CodeNotFound, "workflow %q not found", id)
		}
		wf = &workflowFile{name: name, w: &session.Workflow{SchemaVersion: session.SchemaVersion, WorkflowID: id, Steps: []session.StepRecord{}}}
		s.workflows[id] = wf
	}
	return wf, nil
}

// Workflow returns a copy of the workflow checkpoint.
func (s *Store) Workflow(ctx context.Context, id string) (*session.Workflow, error) {
	if err := session.ValidateID("workflow", id); err != nil {
		return nil, err
	}
	for {
		wf, err := s.workflow(id, false)
		if err != nil {
			return nil, err
		}
		wf.mu.Lock()
		if wf.gone {
			wf.mu.Unlock()
			continue
		}
		defer wf.mu.Unlock()
		if wf.gen == 0 {
			return nil, session.Errorf(session.CodeNotFound, "workflow %q not found", id)
		}
		return session.CloneWorkflow(wf.w), nil
	}
}

// Workflows returns copies of the workflows sessionID owns, by id.
func (s *Store) Workflows(ctx context.Context, sessionID string) ([]*session.Workflow, error) {
	if err := session.ValidateID("session", sessionID); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, errClosed
	}
	out := []*session.Workflow{}
	for _, wf := range s.workflows {
		wf.mu.Lock()
		if wf.w.SessionID == sessionID && !wf.gone && wf.gen > 0 {
			out = append(out, session.CloneWorkflow(wf.w))
		}
		wf.mu.Unlock()
	}
	slices.SortFunc(out, func(a, b *session.Workflow) int { return strings.Compare(a.WorkflowID, b.WorkflowID) })
	return out, nil
}

// SaveStep durably records a completed step: one append and one fdatasync
// (a new workflow's file is created crash-safely). The owner is fixed by the
// first step recorded.
func (s *Store) SaveStep(ctx context.Context, id, sessionID string, step session.StepRecord) error {
	if err := session.NormalizeStep(id, &step); err != nil {
		return err
	}
	if sessionID != "" {
		if err := session.ValidateID("session", sessionID); err != nil {
			return err
		}
	}
	for {
		wf, err := s.workflow(id, true)
		if err != nil {
			return err
		}
		wf.mu.Lock()
		if wf.gone {
			wf.mu.Unlock()
			continue
		}
		err = s.saveStepLocked(wf, id, sessionID, step)
		wf.mu.Unlock()
		return err
	}
}

func (s *Store) saveStepLocked(wf *workflowFile, id, sessionID string, step session.StepRecord) error {
	if wf.broken != nil {
		return session.Wrap(session.CodeInternal, wf.broken, "fsstore.SaveStep: workflow %q", id)
	}
	var fb frameBuf
	creating := wf.log == nil
	if creating {
		fb.buf = append(fb.buf, logMagic...)
	}
	start := len(fb.buf)
	fb.begin()
	if creating {
		fb.add(kindOwner, ownerRec{WorkflowID: id, SessionID: sessionID})
	}
	fb.add(kindStep, &step)
	fb.commit(wf.gen+1, s.opts.Now())
	if fb.err != nil {
		return session.Wrap(session.CodeInternal, fb.err, "fsstore.SaveStep: encode")
	}
	n := int64(len(fb.buf) - start)
	if n > s.opts.MaxCommitBytes {
		return session.Errorf(session.CodeTooLarge, "step record of %d bytes exceeds the limit of %d bytes", n, s.opts.MaxCommitBytes)
	}
	if creating {
		l, err := s.createLog(filepath.Join(s.flowsDir, wf.name), fb.buf)
		if err != nil {
			return session.Wrap(session.CodeInternal, err, "fsstore.SaveStep")
		}
		wf.log = l
		wf.w.SessionID = sessionID
	} else {
		broken, err := s.appendCommit(wf.log, fb.buf)
		if broken {
			wf.broken = err
			s.log.Error("workflow log is broken until reopen", "path", wf.log.Path(), "error", err)
		}
		if err != nil {
			return session.Wrap(session.CodeInternal, err, "fsstore.SaveStep")
		}
	}
	wf.gen++
	session.ApplyStep(wf.w, step)
	s.commits.Add(1)
	s.bytesWritten.Add(int64(len(fb.buf)))
	return nil
}

// DeleteWorkflow removes the workflow checkpoint.
func (s *Store) DeleteWorkflow(ctx context.Context, id string) error {
	if err := session.ValidateID("workflow", id); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return errClosed
	}
	wf := s.workflows[id]
	if wf == nil {
		return session.Errorf(session.CodeNotFound, "workflow %q not found", id)
	}
	wf.mu.Lock()
	defer wf.mu.Unlock()
	if wf.gen == 0 {
		return session.Errorf(session.CodeNotFound, "workflow %q not found", id)
	}
	if err := os.Remove(filepath.Join(s.flowsDir, wf.name)); err != nil {
		return session.Wrap(session.CodeInternal, err, "fsstore.DeleteWorkflow")
	}
	wf.gone = true
	wf.log.Close()
	delete(s.workflows, id)
	if err := atomicfile.SyncDir(s.flowsDir); err != nil {
		return session.Wrap(session.CodeInternal, err, "fsstore.DeleteWorkflow: sync dir")
	}
	return nil
}
