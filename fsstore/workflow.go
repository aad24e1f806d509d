package fsstore

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"strings"

	"github.com/cairn-dev/cairn/internal/recordlog"
	"github.com/cairn-dev/cairn/session"
)

// Workflow logs are small (one record per completed step) and are not
// compacted: a step recorded again supersedes its earlier record on replay.

// removeEmptyLog removes a log (closed) in dir that holds no complete
// commit: its creation never finished.
func (s *Store) removeEmptyLog(dir, path string) error {
	s.log.Warn("removing log with no complete commit", "path", path)
	if err := s.fs.Remove(path); err != nil {
		return err
	}
	return s.fs.SyncDir(dir)
}

// openLog reads a small log whole for recovery, trims a torn tail and
// returns its commits and committed size, leaving it closed. A log with no
// complete commit is removed (nil groups). Readability problems are
// recorded in s.unreadable and reported as nil groups, so one bad log does
// not take the whole store down.
func (s *Store) openLog(dir, name string) ([]commitGroup, int64, error) {
	path := filepath.Join(dir, name)
	l, data, err := recordlog.OpenFS(s.fs, path)
	if err != nil {
		return nil, 0, err
	}
	defer l.Close()
	groups, valid, err := scan(data)
	if err != nil {
		if errors.Is(err, errBadMagic) {
			err = session.Wrap(session.CodeInternal, err, "%s", path)
		}
		s.unreadable[name] = err
		s.log.Error("log cannot be read; leaving it untouched", "path", path, "error", err)
		return nil, 0, nil
	}
	if len(groups) == 0 {
		l.Close()
		return nil, 0, s.removeEmptyLog(dir, path)
	}
	if size := l.Size(); valid < size {
		s.log.Warn("trimming torn or uncommitted log tail", "path", path, "bytes", size-valid)
		if err := l.Truncate(valid); err != nil {
			return nil, 0, err
		}
		s.trimmed.Add(size - valid)
	}
	return groups, valid, nil
}

func (s *Store) loadWorkflow(name string) error {
	groups, size, err := s.openLog(s.flowsDir, name)
	if err != nil || groups == nil {
		return err
	}
	w := &session.Workflow{SchemaVersion: session.SchemaVersion, Steps: []session.StepRecord{}}
	for _, g := range groups {
		for _, r := range g.records {
			if err := applyWorkflowRecord(w, r); err != nil {
				s.unreadable[name] = err
				s.log.Error("workflow log cannot be read; leaving it untouched", "path", filepath.Join(s.flowsDir, name), "error", err)
				return nil
			}
		}
	}
	if name != fileName(w.WorkflowID) {
		return session.Errorf(session.CodeInternal, "%s holds workflow %q, whose file would be %s", name, w.WorkflowID, fileName(w.WorkflowID))
	}
	s.workflows[w.WorkflowID] = &workflowFile{name: name, size: size, gen: groups[len(groups)-1].commit.Generation, w: w}
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
	if err := s.healWorkflow(wf); err != nil {
		return brokenErr(err, "fsstore.SaveStep", "workflow", id)
	}
	var fb frameBuf
	creating := wf.gen == 0
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
	// Workflow logs are opened for each step and closed after it, so
	// however many workflows a workspace holds, they hold no descriptors.
	path := filepath.Join(s.flowsDir, wf.name)
	if creating {
		l, err := s.createLog(path, fb.buf)
		if err != nil {
			return writeError(err, false, path, "fsstore.SaveStep: workflow %q", id)
		}
		l.Close()
		wf.w.SessionID = sessionID
	} else {
		l, err := recordlog.OpenAtFS(s.fs, path, wf.size)
		if err != nil {
			return writeError(err, false, path, "fsstore.SaveStep: workflow %q", id)
		}
		broken, err := s.appendCommit(l, fb.buf)
		l.Close()
		if broken {
			wf.broken = err
			s.log.Error("workflow log is broken; the next step tries to repair it", "path", path, "error", err)
		}
		if err != nil {
			return writeError(err, broken, path, "fsstore.SaveStep: workflow %q", id)
		}
	}
	wf.size += int64(len(fb.buf))
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
	if err := s.checkLock("fsstore.DeleteWorkflow"); err != nil {
		return err
	}
	if err := s.fs.Remove(filepath.Join(s.flowsDir, wf.name)); err != nil {
		return session.Wrap(session.CodeInternal, err, "fsstore.DeleteWorkflow")
	}
	wf.gone = true
	delete(s.workflows, id)
	if err := s.fs.SyncDir(s.flowsDir); err != nil {
		return session.Wrap(session.CodeInternal, err, "fsstore.DeleteWorkflow: sync dir")
	}
	return nil
}
