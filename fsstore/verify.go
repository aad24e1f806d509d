package fsstore

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/cairn-dev/cairn/internal/atomicfile"
	"github.com/cairn-dev/cairn/internal/layout"
	"github.com/cairn-dev/cairn/internal/recordlog"
	"github.com/cairn-dev/cairn/session"
)

var _ session.Checker = (*Store)(nil)

// Verify reads every record of every session and workflow log, checks its
// checksum, its place in a commit and its decoding, and reports every log
// the store does not serve, as a scrub does. A served log found damaged
// now (bit rot since Open) stops being served, as it would have at Open.
// It reads each log up to its committed size without holding its lock, so
// commits go on meanwhile.
func (s *Store) Verify(ctx context.Context) (*session.VerifyReport, error) {
	rep := &session.VerifyReport{Problems: []session.Problem{}, Quarantine: []string{}}
	all, err := s.allSessions()
	if err != nil {
		return nil, err
	}
	for _, sf := range all {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if p := s.verifySession(sf, rep); p != nil {
			rep.Problems = append(rep.Problems, *p)
		}
	}
	s.mu.Lock()
	flows := make([]*workflowFile, 0, len(s.workflows))
	for _, wf := range s.workflows {
		flows = append(flows, wf)
	}
	s.mu.Unlock()
	for _, wf := range flows {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if p := s.verifyWorkflow(wf, rep); p != nil {
			rep.Problems = append(rep.Problems, *p)
		}
	}
	q, err := s.Quarantined()
	if err != nil {
		return nil, session.Wrap(session.CodeInternal, err, "fsstore.Verify: list quarantine")
	}
	rep.Quarantine = append(rep.Quarantine, q...)
	rep.OK = len(rep.Problems) == 0
	return rep, nil
}

func sickProblem(kind string, sk *sickness, path string, gen uint64) *session.Problem {
	return &session.Problem{Kind: kind, ID: sk.id, Path: path, State: sk.state, Offset: sk.at, Size: sk.size, Generation: gen, Message: sk.err.Error()}
}

// verifySession checks one session log; it returns its problem, or nil.
func (s *Store) verifySession(sf *sessionFile, rep *session.VerifyReport) *session.Problem {
	sf.mu.Lock()
	if sf.gone || (sf.sick == nil && sf.t.gen == 0) {
		sf.mu.Unlock()
		return nil
	}
	rep.Sessions++
	if sf.sick != nil {
		defer sf.mu.Unlock()
		return sickProblem("session", sf.sick, sf.path, sf.t.gen)
	}
	id, path, size, gen := sf.t.sessionID, sf.path, sf.size, sf.t.gen
	r, err := recordlog.OpenReaderAtFS(s.fs, path, size)
	sf.mu.Unlock()
	if err != nil {
		return &session.Problem{Kind: "session", ID: id, Path: path, State: StateUnreadable, Offset: -1, Size: size, Generation: gen, Message: err.Error()}
	}
	defer r.Close()
	rep.Bytes += size
	fail := func(at int64, good uint64, err error) *session.Problem {
		s.mu.Lock()
		defer s.mu.Unlock()
		sf.mu.Lock()
		defer sf.mu.Unlock()
		// Only the log read stops being served: a compaction may have
		// replaced it since.
		if fi, serr := s.fs.Lstat(path); serr == nil && !sf.gone && sf.sick == nil && sameFile(r, fi) {
			sf.sick = &sickness{id: id, state: StateCorrupt, err: err, at: at, size: size}
			s.runs.stopped(sf)
			s.unreadable[sf.name] = err
			s.log.Error("session log found damaged; it is no longer served", "path", path, "error", err)
		}
		return &session.Problem{Kind: "session", ID: id, Path: path, State: StateCorrupt, Offset: at, Size: size, Generation: good, Message: err.Error()}
	}
	magic := make([]byte, len(logMagic))
	if n, _ := r.ReadAt(magic, 0); n < len(magic) || !recordlog.HasMagic(magic, logMagic) {
		return fail(0, 0, session.Errorf(session.CodeCorrupt, "session %q: log %s no longer starts as a cairn log (bad magic)", id, path))
	}
	t, asm, err := walkIndex(r, size)
	switch {
	case err != nil:
		return &session.Problem{Kind: "session", ID: id, Path: path, State: StateUnreadable, Offset: -1, Size: size, Generation: gen, Message: err.Error()}
	case asm.err != nil:
		return fail(asm.valid, t.gen, session.Wrap(session.CodeCorrupt, asm.err, "session %q: log %s holds a record at byte %d that does not decode", id, path, asm.valid))
	case asm.valid != size || t.gen != gen:
		later := laterCommits(mustCommitsAfter(r, asm.valid, size), t.gen)
		if len(later) == 0 {
			later = []commitSeen{{gen: gen}}
		}
		return fail(asm.valid, t.gen, errDamaged("session", id, path, asm.valid, size, t.gen, later))
	}
	return nil
}

// verifyWorkflow checks one workflow log; it returns its problem, or nil.
func (s *Store) verifyWorkflow(wf *workflowFile, rep *session.VerifyReport) *session.Problem {
	wf.mu.Lock()
	defer wf.mu.Unlock()
	path := filepath.Join(s.flowsDir, wf.name)
	switch {
	case wf.gone || (wf.sick == nil && wf.gen == 0):
		return nil
	case wf.sick != nil:
		rep.Workflows++
		return sickProblem("workflow", wf.sick, path, wf.gen)
	}
	rep.Workflows++
	id := wf.w.WorkflowID
	r, err := recordlog.OpenReaderAtFS(s.fs, path, wf.size)
	if err != nil {
		return &session.Problem{Kind: "workflow", ID: id, Path: path, State: StateUnreadable, Offset: -1, Size: wf.size, Generation: wf.gen, Message: err.Error()}
	}
	data, err := r.ReadAll()
	if err != nil {
		return &session.Problem{Kind: "workflow", ID: id, Path: path, State: StateUnreadable, Offset: -1, Size: wf.size, Generation: wf.gen, Message: err.Error()}
	}
	rep.Bytes += int64(len(data))
	groups, valid, err := scan(data)
	var bad error
	var gen uint64
	if len(groups) > 0 {
		gen = groups[len(groups)-1].commit.Generation
	}
	if err == nil {
		w := &session.Workflow{}
		for _, g := range groups {
			for _, rec := range g.records {
				if derr := applyWorkflowRecord(w, rec); derr != nil && bad == nil {
					bad = session.Wrap(session.CodeCorrupt, derr, "workflow %q: log %s", id, path)
				}
			}
		}
	}
	switch {
	case err != nil:
		bad = session.Wrap(session.CodeCorrupt, err, "workflow %q: log %s", id, path)
	case bad != nil:
	case valid != int64(len(data)) || gen != wf.gen:
		later := laterCommits(mustCommitsAfter(bytes.NewReader(data), valid, int64(len(data))), gen)
		if len(later) == 0 {
			later = []commitSeen{{gen: wf.gen}}
		}
		bad = errDamaged("workflow", id, path, valid, int64(len(data)), gen, later)
	default:
		return nil
	}
	wf.sick = &sickness{id: id, state: StateCorrupt, err: bad, at: valid, size: int64(len(data))}
	s.log.Error("workflow log found damaged; it is no longer served", "path", path, "error", bad)
	return sickProblem("workflow", wf.sick, path, gen)
}

// sameFile reports whether the reader r reads the file fi describes.
func sameFile(r *recordlog.Reader, fi os.FileInfo) bool {
	rfi, err := r.Stat()
	return err == nil && os.SameFile(rfi, fi)
}

// Repair salvages a session or workflow log the store does not serve
// because it is damaged: it keeps what can be proven intact, copies the
// original bytes to quarantine/ (synced), puts the repaired log in place
// with a rename, and serves it. It writes nothing unless req.Apply is set.
// A session keeps its intact prefix and every intact commit that continues
// its chain of generations; the commits after the first missing generation
// are changes on top of it, so they cannot be applied. A workflow keeps
// every intact commit: each records one step whole.
func (s *Store) Repair(ctx context.Context, req session.RepairRequest) (*session.RepairReport, error) {
	switch {
	case (req.SessionID == "") == (req.WorkflowID == ""):
		return nil, session.Errorf(session.CodeInvalidArgument, "repair: name one session_id or one workflow_id")
	case req.SessionID != "":
		return s.repairSession(req.SessionID, req.Apply)
	default:
		return s.repairWorkflow(req.WorkflowID, req.Apply)
	}
}

// repairable checks that a log can be repaired: it is damaged, not newer
// or unopenable.
func repairable(kind, id string, sk *sickness) error {
	switch {
	case sk == nil:
		return session.Errorf(session.CodeInvalidArgument, "repair: %s %q is not damaged: nothing to repair (`cairn verify` checks every byte)", kind, id)
	case sk.state == StateUnsupported:
		return session.Wrap(session.CodeSchemaUnsupported, sk.err, "repair: %s %q was written by a newer cairn; upgrade cairn to read it, repair never rewrites newer data", kind, id)
	case sk.state != StateCorrupt:
		return session.Wrap(session.CodeOf(sk.err), sk.err, "repair: %s %q cannot be opened; fix that (permissions, an immutable flag, a link) and restart cairn", kind, id)
	}
	return nil
}

func (s *Store) repairSession(id string, apply bool) (*session.RepairReport, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, errClosed
	}
	sf := s.sessions[id]
	if sf == nil {
		return nil, notFound(id)
	}
	sf.mu.Lock()
	defer sf.mu.Unlock()
	if err := repairable("session", id, sf.sick); err != nil {
		return nil, err
	}
	r, err := recordlog.OpenReaderAtFS(s.fs, sf.path, sf.sick.size)
	if err != nil {
		return nil, session.Wrap(session.CodeInternal, err, "repair: open %s", sf.path)
	}
	defer r.Close()
	size := r.Size()
	// The magic is the format's constant, not data: the walk starts past
	// it whatever it holds, and the repaired log gets it whole.
	t, asm, err := walkIndex(r, size)
	if err != nil {
		return nil, session.Wrap(session.CodeInternal, err, "repair: read %s", sf.path)
	}
	if t.gen > 0 && t.sessionID != id && sf.sick.id == id {
		return nil, session.Errorf(session.CodeCorrupt, "repair: %s holds session %q, not %q; move it aside by hand", sf.path, t.sessionID, id)
	}
	rep := &session.RepairReport{Kind: "session", ID: id, Path: sf.path, State: sf.sick.state, Lost: []string{}, Quarantine: layout.Quarantine(s.root)}
	// Keep the intact prefix, then every intact commit that continues its
	// chain of generations: a commit proves itself whole (its commit
	// record counts the records and bytes before it, each checksummed),
	// and the next generation number proves nothing is missing between.
	// Bytes between them (a duplicated record, say) are dropped. The chain
	// ends at the first generation that is missing: every later commit is
	// a change on top of it.
	gen, prev := t.gen, asm.valid
	var ranges [][2]int64
	if t.gen > 0 {
		ranges = append(ranges, [2]int64{int64(len(logMagic)), asm.valid})
	}
	later := laterCommits(mustCommitsAfter(r, asm.valid, size), t.gen)
	var beyond []commitSeen
	for _, c := range later {
		switch {
		case len(beyond) == 0 && c.intact && c.gen == gen+1 && c.start >= prev:
			if c.start > prev {
				rep.Lost = append(rep.Lost, fmt.Sprintf("bytes %d to %d fail their checks and belong to no intact commit; no generation is lost with them", prev, c.start))
			}
			ranges = append(ranges, [2]int64{c.start, c.end})
			gen, prev = c.gen, c.end
		case c.gen > gen:
			beyond = append(beyond, c)
		}
	}
	rep.Generation = gen
	for _, rg := range ranges {
		rep.KeptBytes += rg[1] - rg[0]
	}
	if gen > 0 {
		rep.KeptBytes += int64(len(logMagic))
	}
	rep.LostBytes = size - rep.KeptBytes
	magic := make([]byte, len(logMagic))
	if n, _ := r.ReadAt(magic, 0); n < len(magic) || !recordlog.HasMagic(magic, logMagic) {
		rep.Lost = append(rep.Lost, "the log's first 8 bytes (the format's fixed marker, not data) were damaged; the repaired log has them whole")
	}
	if prev < size {
		rep.Lost = append(rep.Lost, fmt.Sprintf("bytes %d to %d fail their checks or follow a generation that does", prev, size))
	}
	if len(beyond) > 0 {
		rep.Lost = append(rep.Lost, fmt.Sprintf("generations %d to %d: generation %d is damaged, and each later one is a change on top of it, so none can be applied without it",
			gen+1, beyond[len(beyond)-1].gen, gen+1))
	}
	if gen == 0 {
		rep.Lost = append(rep.Lost, "no generation reads back intact: the log is moved to quarantine and the session is removed")
	}
	if !apply {
		return rep, nil
	}
	name := sf.name
	// A log found damaged after Open (Verify) may still be open, and the
	// journal may hold commits of it: the repaired one replaces it.
	if err := s.retireLocked(sf); err != nil {
		return nil, err
	}
	s.closeLog(sf)
	s.removeIdxLocked(sf)
	if gen == 0 {
		q, err := s.moveToQuarantine(s.sessionsDir, sf.path, name, "damaged", true)
		if err != nil {
			return nil, session.Wrap(session.CodeInternal, err, "repair: move %s to quarantine", sf.path)
		}
		sf.gone = true
		delete(s.sessions, id)
		delete(s.unreadable, name)
		s.runs.forget(sf)
		s.runs.drop()
		rep.Applied, rep.Quarantine = true, q
		return rep, nil
	}
	q, nt, err := s.rewriteFrom(r, sf.path, name, ranges)
	if err != nil {
		return nil, err
	}
	sf.gone = true
	delete(s.sessions, id)
	delete(s.unreadable, name)
	s.runs.forget(sf)
	s.runs.drop()
	nt.trim()
	s.sessions[nt.sessionID] = &sessionFile{name: name, path: sf.path, size: rep.KeptBytes, t: nt}
	s.log.Warn("repaired session log", "path", sf.path, "generation", nt.gen, "quarantine", q)
	rep.Applied, rep.Quarantine = true, q
	return rep, nil
}

// rewriteFrom replaces the log at path with the magic and the byte ranges
// of r given (replaceLog), and returns the quarantine path and the new
// log's index.
func (s *Store) rewriteFrom(r *recordlog.Reader, path, name string, ranges [][2]int64) (string, *tracker, error) {
	var nt *tracker
	q, err := s.replaceLog(path, name, r, r.Size(), func(tmp *atomicfile.Temp) error {
		if err := tmp.WriteAt([]byte(logMagic), 0); err != nil {
			return err
		}
		buf := make([]byte, 1<<20)
		keep := int64(len(logMagic))
		for _, rg := range ranges {
			for off := rg[0]; off < rg[1]; {
				part := buf[:min(int64(len(buf)), rg[1]-off)]
				if n, err := r.ReadAt(part, off); n < len(part) {
					return fmt.Errorf("read %s: %w", path, err)
				}
				if err := tmp.WriteAt(part, keep); err != nil {
					return err
				}
				off += int64(len(part))
				keep += int64(len(part))
			}
		}
		var err error
		if nt, err = indexOf(tmp, keep); err != nil {
			return fmt.Errorf("the repaired log of %s: %w", path, err)
		}
		return nil
	})
	return q, nt, err
}

func (s *Store) repairWorkflow(id string, apply bool) (*session.RepairReport, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, errClosed
	}
	wf := s.workflows[id]
	if wf == nil {
		return nil, session.Errorf(session.CodeNotFound, "workflow %q not found", id)
	}
	wf.mu.Lock()
	defer wf.mu.Unlock()
	if err := repairable("workflow", id, wf.sick); err != nil {
		return nil, err
	}
	path := filepath.Join(s.flowsDir, wf.name)
	r, err := recordlog.OpenReaderAtFS(s.fs, path, wf.sick.size)
	if err != nil {
		return nil, session.Wrap(session.CodeInternal, err, "repair: open %s", path)
	}
	data, err := r.ReadAll()
	if err != nil {
		return nil, session.Wrap(session.CodeInternal, err, "repair: read %s", path)
	}
	plan := planWorkflow(data, id, wf.w.SessionID)
	rep := &session.RepairReport{Kind: "workflow", ID: id, Path: path, State: wf.sick.state, Generation: plan.commits,
		KeptBytes: plan.kept, LostBytes: int64(len(data)) - plan.kept, Lost: plan.lost, Steps: plan.steps, Quarantine: layout.Quarantine(s.root)}
	if !apply {
		return rep, nil
	}
	if plan.commits == 0 {
		q, err := s.moveToQuarantine(s.flowsDir, path, wf.name, "damaged", true)
		if err != nil {
			return nil, session.Wrap(session.CodeInternal, err, "repair: move %s to quarantine", path)
		}
		wf.gone = true
		delete(s.workflows, id)
		delete(s.unreadable, wf.name)
		rep.Applied, rep.Quarantine = true, q
		return rep, nil
	}
	q, err := s.replaceLog(path, wf.name, bytes.NewReader(data), int64(len(data)), func(tmp *atomicfile.Temp) error {
		return tmp.WriteAt(plan.log, 0)
	})
	if err != nil {
		return nil, err
	}
	wf.gone = true
	delete(s.workflows, id)
	delete(s.unreadable, wf.name)
	s.workflows[id] = &workflowFile{name: wf.name, size: int64(len(plan.log)), gen: plan.commits, w: plan.w}
	s.log.Warn("repaired workflow log", "path", path, "commits", plan.commits, "quarantine", q)
	rep.Applied, rep.Quarantine = true, q
	return rep, nil
}

// replaceLog replaces the log at path (name in its folder), whose size
// bytes orig reads, with what write puts in a temp file beside it,
// crash-safely: the new log is written and synced, the original is copied
// to quarantine/ (synced), and the new log is renamed into place. It
// returns the quarantine path.
func (s *Store) replaceLog(path, name string, orig io.ReaderAt, size int64, write func(tmp *atomicfile.Temp) error) (string, error) {
	tmp, err := atomicfile.NewTempFS(s.fs, path, 0o600, nil)
	if err != nil {
		return "", session.Wrap(session.CodeInternal, err, "repair")
	}
	defer tmp.Abort()
	if err := write(tmp); err != nil {
		return "", session.Wrap(session.CodeInternal, err, "repair")
	}
	if err := tmp.Sync(); err != nil {
		return "", session.Wrap(session.CodeInternal, err, "repair")
	}
	q, err := s.copyToQuarantine(orig, name, 0, size, "damaged")
	if err != nil {
		return "", session.Wrap(session.CodeInternal, err, "repair: keep %s in quarantine", path)
	}
	f, err := tmp.Commit()
	if f != nil {
		f.Close()
	}
	if err != nil {
		return "", session.Wrap(session.CodeInternal, err, "repair: put the repaired log in place (the original is kept at %s)", q)
	}
	return q, nil
}

// workflowPlan is what repairing a workflow log keeps: the new log, its
// commits and steps, and what is lost.
type workflowPlan struct {
	log     []byte
	commits uint64
	kept    int64
	lost    []string
	steps   []string
	w       *session.Workflow
}

// planWorkflow builds the repaired content of a damaged workflow log: every
// intact commit (its records whole, checksummed, and as many as its commit
// record says) renumbered in order, the first one preceded by the owner
// record when the original one is lost.
func planWorkflow(data []byte, id, owner string) workflowPlan {
	p := workflowPlan{lost: []string{}, steps: []string{}}
	groups, valid, _ := scanRecords(data, int64(len(logMagic)), 0)
	var spans [][2]int64
	prev := int64(len(logMagic))
	for _, g := range groups {
		spans = append(spans, [2]int64{prev, g.end})
		prev = g.end
	}
	var last uint64
	if len(groups) > 0 {
		last = groups[len(groups)-1].commit.Generation
	}
	for _, c := range laterCommits(mustCommitsAfter(bytes.NewReader(data), valid, int64(len(data))), last) {
		if c.intact && c.start >= prev {
			spans = append(spans, [2]int64{c.start, c.end})
			prev = c.end
		}
	}
	w := &session.Workflow{SchemaVersion: session.SchemaVersion, WorkflowID: id, SessionID: owner, Steps: []session.StepRecord{}}
	var fb frameBuf
	fb.buf = append(fb.buf, logMagic...)
	covered := int64(len(logMagic))
	hasOwner := false
	for _, sp := range spans {
		if sp[0] > covered {
			p.lost = append(p.lost, fmt.Sprintf("bytes %d to %d fail their checks: the step recorded there is lost and runs again when the workflow resumes", covered, sp[0]))
		}
		covered = sp[1]
		var recs []recordlog.Record
		recordlog.Scan(data[:sp[1]], sp[0], func(r recordlog.Record) bool {
			recs = append(recs, r)
			return true
		})
		var c commitRec
		if len(recs) == 0 || recs[len(recs)-1].Kind != kindCommit || decMode.Unmarshal(recs[len(recs)-1].Payload, &c) != nil {
			p.lost = append(p.lost, fmt.Sprintf("bytes %d to %d do not read back as one commit", sp[0], sp[1]))
			continue
		}
		scratch := session.CloneWorkflow(w)
		ok := true
		for _, r := range recs[:len(recs)-1] {
			if r.Kind == kindOwner && hasOwner {
				continue
			}
			if applyWorkflowRecord(scratch, r) != nil {
				ok = false
			}
		}
		if !ok {
			p.lost = append(p.lost, fmt.Sprintf("bytes %d to %d: a record does not decode; the step recorded there is lost", sp[0], sp[1]))
			continue
		}
		fb.begin()
		if !hasOwner && recs[0].Kind != kindOwner {
			fb.add(kindOwner, ownerRec{WorkflowID: id, SessionID: owner})
			if owner == "" {
				p.lost = append(p.lost, "the record naming the workflow's owning session is lost: the repaired workflow has no owner, so it is not exported or deleted with a session")
			}
		}
		for _, r := range recs[:len(recs)-1] {
			if r.Kind == kindOwner && hasOwner {
				continue
			}
			fb.addRaw(r.Kind, r.Payload)
		}
		hasOwner = true
		p.commits++
		fb.commit(p.commits, c.Time)
		w = scratch
		w.WorkflowID = id
		p.kept += sp[1] - sp[0]
	}
	if int64(len(data)) > covered {
		p.lost = append(p.lost, fmt.Sprintf("bytes %d to %d fail their checks: whatever step they held is lost and runs again when the workflow resumes", covered, len(data)))
	}
	if p.commits == 0 {
		p.lost = append(p.lost, "no commit reads back intact: the log is moved to quarantine and the workflow is removed")
	}
	for _, st := range w.Steps {
		p.steps = append(p.steps, st.StepID)
	}
	p.log, p.w = fb.buf, w
	if p.commits > 0 {
		p.kept += int64(len(logMagic))
	}
	return p
}
