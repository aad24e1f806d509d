package fsstore

import (
	"context"
	"errors"
	"io"
	"path/filepath"
	"slices"
	"strings"

	"github.com/cairn-dev/cairn/internal/recordlog"
	"github.com/cairn-dev/cairn/session"
)

// Workflow logs are small (one record per completed step) and are not
// compacted: a step recorded again supersedes its earlier record on replay.

// loadWorkflow reads one workflow log whole for recovery (workflow logs are
// small), as loadSession does a session log: it trims a torn tail (keeping
// its bytes in quarantine/), moves a log with no intact commit to
// quarantine/, and records a log it must not serve (damaged, newer,
// unopenable) without touching it, so one bad log does not take the store
// down.
func (s *Store) loadWorkflow(name string) error {
	path := filepath.Join(s.flowsDir, name)
	l, err := s.openForRecovery(path)
	if err != nil {
		s.sickWorkflow(name, path, nil, StateUnreadable, err)
		return nil
	}
	defer l.Close()
	size := l.Size()
	data, err := l.ReadAll()
	if err != nil {
		s.sickWorkflow(name, path, nil, StateUnreadable, err)
		return nil
	}
	owner := firstOwner(data)
	groups, valid, err := scan(data)
	switch {
	case errors.Is(err, errBadMagic):
		s.sickWorkflow(name, path, owner, StateCorrupt, session.Errorf(session.CodeCorrupt,
			"workflow log %s does not start as a cairn log (bad magic); it is kept as it is", path))
		return nil
	case err != nil:
		s.sickWorkflow(name, path, owner, StateUnsupported, session.Wrap(session.CodeOf(err), err, "workflow log %s", path))
		return nil
	}
	w := &session.Workflow{SchemaVersion: session.SchemaVersion, Steps: []session.StepRecord{}}
	for _, g := range groups {
		for _, r := range g.records {
			if err := applyWorkflowRecord(w, r); err != nil {
				state := StateCorrupt
				if session.CodeOf(err) == session.CodeSchemaUnsupported {
					state = StateUnsupported
				} else {
					err = session.Wrap(session.CodeCorrupt, err, "workflow log %s", path)
				}
				s.sickWorkflow(name, path, owner, state, err)
				return nil
			}
		}
	}
	var gen uint64
	if len(groups) > 0 {
		gen = groups[len(groups)-1].commit.Generation
	}
	if valid < size {
		if later := laterCommits(mustCommitsAfter(l, valid, size), gen); len(later) > 0 {
			id := w.WorkflowID
			if id == "" {
				id = idFromName(name)
			}
			s.sickWorkflow(name, path, owner, StateCorrupt, errDamaged("workflow", id, path, valid, size, gen, later)).at = valid
			return nil
		}
	}
	if len(groups) == 0 {
		l.Close()
		if err := s.setAside(s.flowsDir, path, name); err != nil {
			s.sickWorkflow(name, path, owner, StateCorrupt, err)
		}
		return nil
	}
	if name != fileName(w.WorkflowID) {
		s.sickWorkflow(name, path, owner, StateCorrupt, session.Errorf(session.CodeCorrupt,
			"%s holds workflow %q, whose file would be %s; it is kept as it is", path, w.WorkflowID, fileName(w.WorkflowID)))
		return nil
	}
	if valid < size {
		if err := s.trimTorn(l, name, valid); err != nil {
			s.sickWorkflow(name, path, owner, StateUnreadable, err)
			return nil
		}
	}
	s.workflows[w.WorkflowID] = &workflowFile{name: name, size: valid, gen: gen, w: w}
	return nil
}

// mustCommitsAfter is commitsAfter for a log already read whole: a read
// error there is not expected, and counts as no commits found.
func mustCommitsAfter(r io.ReaderAt, off, size int64) []commitSeen {
	seen, _ := commitsAfter(r, off, size)
	return seen
}

// firstOwner returns the owner record that opens a workflow log, when it
// is intact (nil otherwise).
func firstOwner(data []byte) *ownerRec {
	if !recordlog.HasMagic(data, logMagic) {
		return nil
	}
	var o *ownerRec
	recordlog.Scan(data, int64(len(logMagic)), func(r recordlog.Record) bool {
		var rec ownerRec
		if r.Kind == kindOwner && decMode.Unmarshal(r.Payload, &rec) == nil {
			o = &rec
		}
		return false
	})
	return o
}

// sickWorkflow records a workflow log the store does not serve; every call
// on the workflow answers err.
func (s *Store) sickWorkflow(name, path string, owner *ownerRec, state string, err error) *sickness {
	id := idFromName(name)
	w := &session.Workflow{SchemaVersion: session.SchemaVersion, WorkflowID: id, Steps: []session.StepRecord{}}
	if owner != nil {
		w.WorkflowID, w.SessionID = owner.WorkflowID, owner.SessionID
	}
	if w.WorkflowID == "" {
		w.WorkflowID = name
	}
	s.log.Error("workflow log not served", "path", path, "state", state, "error", err)
	sk := &sickness{id: w.WorkflowID, state: state, err: err, at: -1, size: -1}
	if fi, err := s.fs.Lstat(path); err == nil {
		sk.size = fi.Size()
	}
	s.unreadable[name] = err
	s.workflows[w.WorkflowID] = &workflowFile{name: name, w: w, sick: sk}
	return sk
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
		if wf.sick != nil {
			return nil, wf.sick.err
		}
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
		var sick error
		switch {
		case wf.w.SessionID != sessionID || wf.gone:
		case wf.sick != nil:
			sick = session.Wrap(session.CodeOf(wf.sick.err), wf.sick.err, "session %q owns workflow %q, which is not served", sessionID, wf.sick.id)
		case wf.gen > 0:
			out = append(out, session.CloneWorkflow(wf.w))
		}
		wf.mu.Unlock()
		if sick != nil {
			return nil, sick
		}
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
	if wf.sick != nil {
		return wf.sick.err
	}
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
		broken, _, err := s.appendCommit(l, fb.buf, "")
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
	if wf.sick != nil {
		if _, err := s.moveToQuarantine(s.flowsDir, filepath.Join(s.flowsDir, wf.name), wf.name, "deleted", true); err != nil {
			return session.Wrap(session.CodeInternal, err, "fsstore.DeleteWorkflow: move %s to quarantine", wf.name)
		}
		wf.gone = true
		delete(s.workflows, id)
		delete(s.unreadable, wf.name)
		return nil
	}
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
