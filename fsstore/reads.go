package fsstore

import (
	"context"
	"slices"
	"sort"
	"time"

	"github.com/cairn-dev/cairn/internal/atomicfile"
	"github.com/cairn-dev/cairn/internal/recordlog"
	"github.com/cairn-dev/cairn/internal/scratch"
	"github.com/cairn-dev/cairn/session"
)

// The reads below hold the session's lock while they read (a commit's
// fsync waits for them, and they for it), and pread exactly the records
// the index names for the range asked: they cost what they return.

// reading returns the existing session id, locked, with a reader of its
// log. The caller unlocks.
func (s *Store) reading(id string) (*sessionFile, frameReader, error) {
	sf, err := s.lockSession(id)
	if err != nil {
		return nil, frameReader{}, err
	}
	l, err := s.logFor(sf)
	if err != nil {
		sf.mu.Unlock()
		return nil, frameReader{}, err
	}
	return sf, frameReader{r: l, path: sf.path}, nil
}

// readingArtifacts is reading for a read of the artifacts ids, which it
// checks first.
func (s *Store) readingArtifacts(id string, ids []string) (*sessionFile, frameReader, error) {
	for _, a := range ids {
		if err := session.ValidateID("artifact", a); err != nil {
			return nil, frameReader{}, err
		}
	}
	return s.reading(id)
}

// decodeFrame reads the record at it into v.
func (fr frameReader) decodeFrame(it item, v any) error {
	rec, err := fr.frame(it)
	if err != nil {
		return err
	}
	if err := decMode.Unmarshal(rec.Payload, v); err != nil {
		return session.Wrap(session.CodeInternal, err, "decode %q record of %s at %d", rec.Kind, fr.path, it.off())
	}
	return nil
}

// Head returns the latest generation without messages, artifacts and
// traces, reading only the records of the parts it returns.
func (s *Store) Head(ctx context.Context, id string) (*session.State, session.Summary, error) {
	return s.head(id, false)
}

// RunHead is Head cut to what the run operations read: the session's
// runs and loop checkpoints, its id and generation, and its summary. It
// reads none of its other records (workspace, agent, handoff, runtime,
// files, metadata, verifications, tasks), so a run operation costs what
// the session's runs and checkpoints cost, not the rest of its head.
func (s *Store) RunHead(ctx context.Context, id string) (*session.State, session.Summary, error) {
	return s.head(id, true)
}

// head is Head, or RunHead when runsOnly.
func (s *Store) head(id string, runsOnly bool) (*session.State, session.Summary, error) {
	sf, fr, err := s.reading(id)
	if err != nil {
		return nil, session.Summary{}, err
	}
	defer sf.mu.Unlock()
	t := sf.t
	var room [8]item
	if fr, err = fr.prefetch(appendHeadItems(room[:0], t, true, runsOnly)); err != nil {
		return nil, session.Summary{}, err
	}
	snap := &session.Snapshot{
		SchemaVersion: session.SchemaVersion, SessionID: t.sessionID, Generation: t.gen,
		CreatedAt: t.created, UpdatedAt: t.updated, Messages: []session.Value{},
	}
	if !runsOnly {
		if err := headRest(fr, t, snap); err != nil {
			return nil, session.Summary{}, err
		}
	}
	if err := decodeRuns(fr, t, &snap.Runs); err != nil {
		return nil, session.Summary{}, err
	}
	st := &session.State{Snapshot: snap}
	for run, l := range t.ckpts {
		cp := new(session.LoopCheckpoint)
		at := l.events[len(l.events)-1].at
		if m, ok := t.memoOf(at); ok {
			*cp = m.(session.LoopCheckpoint)
			// The caller owns what it is given: the memo stays as written.
			cp.State = slices.Clone(cp.State)
			if cp.Files != nil {
				f := *cp.Files
				cp.Files = &f
			}
		} else if err := fr.decodeFrame(at, cp); err != nil {
			return nil, session.Summary{}, err
		}
		if st.Checkpoints == nil {
			st.Checkpoints = map[string]*session.LoopCheckpoint{}
		}
		st.Checkpoints[run] = cp
	}
	return st, sf.summaryLocked(), nil
}

// headRest decodes into snap the parts of Head that RunHead leaves out:
// the workspace, agent, handoff, runtime, files, metadata, verifications
// and tasks.
func headRest(fr frameReader, t *tracker, snap *session.Snapshot) error {
	var err error
	if snap.Workspace, err = headSingle[session.Workspace](fr, t, kindWorkspace); err != nil {
		return err
	}
	if it, ok := t.single[kindAgent]; ok {
		if err := fr.decodeFrame(it, &snap.Agent); err != nil {
			return err
		}
	}
	if snap.Handoff, err = headSingle[session.Handoff](fr, t, kindHandoff); err != nil {
		return err
	}
	if snap.Runtime, err = headSingle[session.Runtime](fr, t, kindRuntime); err != nil {
		return err
	}
	if snap.Files, err = headSingle[session.ManifestRef](fr, t, kindFiles); err != nil {
		return err
	}
	for _, key := range sortedKeys(t.meta) {
		var m metaRec
		if err := fr.decodeFrame(t.meta[key], &m); err != nil {
			return err
		}
		if snap.Metadata == nil {
			snap.Metadata = map[string]session.Value{}
		}
		snap.Metadata[m.Key] = m.Value
	}
	if err := decodeKeyed(fr, &t.verifs, &snap.Verifications); err != nil {
		return err
	}
	return decodeKeyed(fr, &t.tasks, &snap.SubagentTasks)
}

// headSingle returns the record of kind (one of t.single's) as Head
// returns it: from the last commit's memo (only kindFiles has memos), else
// decoded; nil when the session has none.
func headSingle[T any](fr frameReader, t *tracker, kind byte) (*T, error) {
	it, ok := t.single[kind]
	if !ok {
		return nil, nil
	}
	v := new(T)
	if m, ok := t.memoOf(it); ok {
		if m, ok := m.(T); ok {
			*v = m
			return v, nil
		}
	}
	return v, fr.decodeFrame(it, v)
}

// appendHeadItems appends to its the records Head returns (RunHead's when
// runsOnly); with skipMemos, less those the last commit left decoded
// (tracker.memo) and the runs whose records are kept decoded
// (tracker.runVals), which Head does not read.
func appendHeadItems(its []item, t *tracker, skipMemos, runsOnly bool) []item {
	add := func(it item) {
		if skipMemos {
			if _, ok := t.memoOf(it); ok {
				return
			}
		}
		its = append(its, it)
	}
	if !runsOnly {
		for _, k := range []byte{kindWorkspace, kindAgent, kindHandoff, kindRuntime, kindFiles} {
			if it, ok := t.single[k]; ok {
				add(it)
			}
		}
		for _, it := range t.meta {
			add(it)
		}
		for _, k := range []*keyed[item]{&t.verifs, &t.tasks} {
			for _, id := range k.order {
				add(k.at[id])
			}
		}
	}
	for _, id := range t.runs.order {
		it := t.runs.at[id]
		if v, ok := t.runVals[id]; !skipMemos || !ok || v.at != it {
			add(it)
		}
	}
	for _, l := range t.ckpts {
		add(l.events[len(l.events)-1].at)
	}
	return its
}

// decodeRuns appends t's runs to out, in order, from those kept decoded
// (tracker.runVals, which holds the runs of the last commit's memo too),
// or else from their records, which it then keeps decoded.
func decodeRuns(fr frameReader, t *tracker, out *[]session.Run) error {
	*out = slices.Grow(*out, len(t.runs.order))
	var ends []time.Time // the end times given out, in one allocation
	own := func(r session.Run) session.Run {
		if r.EndedAt != nil {
			if ends == nil {
				ends = make([]time.Time, 0, len(t.runs.order))
			}
			ends = append(ends, *r.EndedAt)
			r.EndedAt = &ends[len(ends)-1]
		}
		return r
	}
	for _, id := range t.runs.order {
		it := t.runs.at[id]
		if v, ok := t.runVals[id]; ok && v.at == it {
			*out = append(*out, own(v.r))
			continue
		}
		var r session.Run
		if err := fr.decodeFrame(it, &r); err != nil {
			return err
		}
		if t.runVals != nil {
			kept := r
			if r.EndedAt != nil {
				e := *r.EndedAt
				kept.EndedAt = &e
			}
			t.runVals[id] = runVal{at: it, r: kept}
		}
		*out = append(*out, r)
	}
	return nil
}

func decodeKeyed[T any](fr frameReader, k *keyed[item], out *[]T) error {
	for _, id := range k.order {
		var v T
		if err := fr.decodeFrame(k.at[id], &v); err != nil {
			return err
		}
		*out = append(*out, v)
	}
	return nil
}

// readCheckpoint returns the latest loop checkpoint of run, with its
// state. sf.mu is held.
func (s *Store) readCheckpoint(sf *sessionFile, run string) (*session.LoopCheckpoint, error) {
	l, err := s.logFor(sf)
	if err != nil {
		return nil, err
	}
	line := sf.t.ckpts[run]
	cp := new(session.LoopCheckpoint)
	if err := (frameReader{r: l, path: sf.path}).decodeFrame(line.events[len(line.events)-1].at, cp); err != nil {
		return nil, err
	}
	return cp, nil
}

// pageBounds resolves q over a list of items whose marks are marks.
func pageBounds(q session.Query, its []item, marks []mark) (from, n, to int64) {
	total := int64(len(its))
	from, to = q.Bounds(total, since(marks, total, q.SinceGeneration))
	n = q.Cut(from, to, func(i int64) int64 { return int64(its[i].size) })
	return from, n, to
}

// Messages returns a page of the latest generation's messages. When ctx
// carries a scratch.Pad, the messages may be slices of buffers it lent:
// the caller resets the pad only once done with the page.
func (s *Store) Messages(ctx context.Context, id string, q session.Query) (session.Page[session.Value], error) {
	if err := q.Check(); err != nil {
		return session.Page[session.Value]{}, err
	}
	sf, fr, err := s.reading(id)
	if err != nil {
		return session.Page[session.Value]{}, err
	}
	defer sf.mu.Unlock()
	fr.pad = scratch.From(ctx)
	t := sf.t
	from, n, to := pageBounds(q, t.msgs, t.msgMarks)
	its := t.msgs[from : from+n]
	// The messages share the frames read for them, unless they are a small
	// part of those frames (a few of a bulk append): then they are copied
	// out, so that holding a tail does not hold its neighbours.
	keep := sharesFrames(its)
	out := make([]session.Value, n)
	err = fr.elems(its, true, func(i int, raw []byte) error {
		if keep {
			out[i] = raw
		} else {
			out[i] = slices.Clone(raw)
		}
		return nil
	})
	if err != nil {
		return session.Page[session.Value]{}, err
	}
	return session.Page[session.Value]{Generation: t.gen, Total: t.messages(), From: from, Next: from + n, More: from+n < to, Items: out}, nil
}

// sharesFrames reports whether the elements its make up at least half of
// the bytes of the frames holding them.
func sharesFrames(its []item) bool {
	var used, frames int64
	var last int64 = -1
	for _, it := range its {
		used += int64(it.size)
		if it.off() != last {
			frames += int64(it.fsz)
			last = it.off()
		}
	}
	return 2*used >= frames
}

// Traces returns a page of the latest generation's traces.
func (s *Store) Traces(ctx context.Context, id string, q session.Query) (session.Page[session.Trace], error) {
	if err := q.Check(); err != nil {
		return session.Page[session.Trace]{}, err
	}
	sf, fr, err := s.reading(id)
	if err != nil {
		return session.Page[session.Trace]{}, err
	}
	defer sf.mu.Unlock()
	t := sf.t
	from, n, to := pageBounds(q, t.traces, t.trMarks)
	out := make([]session.Trace, n)
	err = fr.elems(t.traces[from:from+n], false, func(i int, raw []byte) error {
		return decodeRaw(raw, &out[i])
	})
	if err != nil {
		return session.Page[session.Trace]{}, err
	}
	return session.Page[session.Trace]{Generation: t.gen, Total: int64(len(t.traces)), From: from, Next: from + n, More: from+n < to, Items: out}, nil
}

func decodeRaw(raw []byte, v any) error {
	if err := decMode.Unmarshal(raw, v); err != nil {
		return session.Wrap(session.CodeInternal, err, "decode session log element")
	}
	return nil
}

// Artifacts returns the named artifacts (all when ids is nil), reading
// their data only when withData.
func (s *Store) Artifacts(ctx context.Context, id string, ids []string, withData bool) (session.Page[session.Artifact], error) {
	sf, fr, err := s.readingArtifacts(id, ids)
	if err != nil {
		return session.Page[session.Artifact]{}, err
	}
	defer sf.mu.Unlock()
	t := sf.t
	order := t.arts.order
	if ids != nil {
		for _, a := range ids {
			if !t.arts.has(a) {
				return session.Page[session.Artifact]{}, session.Errorf(session.CodeNotFound, "session %q holds no artifact %q", id, a)
			}
		}
		if len(ids) == 1 {
			// One artifact by id (engine.Artifact, a saver's get): a map
			// lookup, whatever the session holds.
			order = ids
		} else {
			order = slices.DeleteFunc(slices.Clone(order), func(a string) bool { return !slices.Contains(ids, a) })
		}
	}
	out := make([]session.Artifact, 0, len(order))
	for _, aid := range order {
		a := t.arts.at[aid]
		var v session.Artifact
		if a.legacy {
			err = fr.elems([]item{a.hdr}, false, func(_ int, raw []byte) error { return decodeRaw(raw, &v) })
		} else {
			err = fr.decodeFrame(a.hdr, &v)
			if err == nil && withData && a.hasDat {
				rec, rerr := fr.frame(a.data)
				v.Data, err = rec.Payload, rerr
			}
		}
		if err != nil {
			return session.Page[session.Artifact]{}, err
		}
		if !withData {
			v.Data = nil
		}
		out = append(out, v)
	}
	n := int64(len(out))
	return session.Page[session.Artifact]{Generation: t.gen, Total: int64(len(t.arts.order)), Next: n, Items: out}, nil
}

// runEvent locates one event of a run.
type runEvent struct {
	gen   uint64
	trace bool
	at    item
}

// RunEvents returns a page of a run's traces and kept checkpoints, in
// commit order (within a commit, its traces before its checkpoint).
func (s *Store) RunEvents(ctx context.Context, id, runID string, q session.Query) (session.Page[session.RunEvent], error) {
	if err := session.ValidateID("run", runID); err != nil {
		return session.Page[session.RunEvent]{}, err
	}
	if err := q.Check(); err != nil {
		return session.Page[session.RunEvent]{}, err
	}
	sf, fr, err := s.reading(id)
	if err != nil {
		return session.Page[session.RunEvent]{}, err
	}
	defer sf.mu.Unlock()
	t := sf.t
	var evs []runEvent
	for _, i := range t.traceRuns[runID] {
		evs = append(evs, runEvent{gen: genOf(t.trMarks, int64(i)), trace: true, at: t.traces[i]})
	}
	if l := t.ckpts[runID]; l != nil {
		for _, ev := range l.events {
			evs = append(evs, runEvent{gen: ev.gen, at: ev.at})
		}
	}
	sort.SliceStable(evs, func(i, j int) bool {
		if evs[i].gen != evs[j].gen {
			return evs[i].gen < evs[j].gen
		}
		return evs[i].trace && !evs[j].trace
	})
	total := int64(len(evs))
	sinceIdx := int64(sort.Search(len(evs), func(i int) bool { return evs[i].gen > q.SinceGeneration }))
	from, to := q.Bounds(total, sinceIdx)
	n := q.Cut(from, to, func(i int64) int64 { return int64(evs[i].at.size) })
	out := make([]session.RunEvent, n)
	for i, ev := range evs[from : from+n] {
		out[i] = session.RunEvent{Generation: ev.gen}
		if ev.trace {
			tr := new(session.Trace)
			err = fr.elems([]item{ev.at}, false, func(_ int, raw []byte) error { return decodeRaw(raw, tr) })
			out[i].Kind, out[i].Trace = session.EventTrace, tr
		} else {
			cp := new(session.LoopCheckpoint)
			err = fr.decodeFrame(ev.at, cp)
			out[i].Kind, out[i].Checkpoint = session.EventCheckpoint, cp
		}
		if err != nil {
			return session.Page[session.RunEvent]{}, err
		}
	}
	return session.Page[session.RunEvent]{Generation: t.gen, Total: total, From: from, Next: from + n, More: from+n < to, Items: out}, nil
}

// Copy creates dst from src inside the store: the live records of src are
// copied into dst's new log as they are read, then is applied in the same
// commit, and the log appears whole (written beside, fsynced, renamed). An
// earlier generation (at) is rebuilt by replaying src's log, which costs
// its size.
func (s *Store) Copy(ctx context.Context, src, dst string, at uint64, then *session.Change) (session.CommitResult, error) {
	if err := session.ValidateID("session", dst); err != nil {
		return session.CommitResult{}, err
	}
	if then != nil && then.Replace != nil {
		return session.CommitResult{}, session.Errorf(session.CodeInvalidArgument, "fsstore.Copy: then must be a delta")
	}
	sf, err := s.lockSession(src)
	if err != nil {
		return session.CommitResult{}, err
	}
	if at != 0 && at != sf.t.gen {
		sf.mu.Unlock()
		return s.copyReplayed(ctx, src, dst, at, then)
	}
	snap := sf.t.clone()
	r, err := recordlog.OpenReaderAtFS(s.fs, sf.path, sf.size)
	sf.mu.Unlock()
	if err != nil {
		return session.CommitResult{}, session.Wrap(session.CodeInternal, err, "fsstore.Copy")
	}
	defer r.Close()
	for {
		df, err := s.session(dst, true)
		if err != nil {
			return session.CommitResult{}, err
		}
		df.mu.Lock()
		if df.gone {
			df.mu.Unlock()
			continue
		}
		res, err := s.copyLocked(df, dst, frameReader{r: r, path: sf.path}, snap, then)
		df.mu.Unlock()
		return res, err
	}
}

func (s *Store) copyLocked(df *sessionFile, dst string, fr frameReader, snap *tracker, then *session.Change) (session.CommitResult, error) {
	if err := df.sickErr(); err != nil {
		return session.CommitResult{}, err
	}
	if err := session.CheckExpect(dst, df.t.gen, session.CommitOptions{MustNotExist: true}); err != nil {
		return session.CommitResult{}, err
	}
	if err := s.checkLock("fsstore.Copy"); err != nil {
		return session.CommitResult{}, err
	}
	tmp, err := atomicfile.NewTempFS(s.fs, df.path, 0o600, s.faultAt("create."))
	if err != nil {
		return session.CommitResult{}, session.FileError(err, df.path, "fsstore.Copy: session %q", dst)
	}
	defer tmp.Abort()
	size, err := writeLog(tmp, fr, snap, dst, false, then, 1, s.opts.Now().UTC())
	if err != nil {
		return session.CommitResult{}, session.FileError(err, df.path, "fsstore.Copy: session %q", dst)
	}
	next, err := indexOf(tmp, size)
	if err != nil {
		return session.CommitResult{}, session.Wrap(session.CodeInternal, err, "fsstore.Copy: copy of %s", fr.path)
	}
	if next.live > s.opts.MaxSessionBytes {
		return session.CommitResult{}, session.Errorf(session.CodeTooLarge, "a copy of %d live bytes would pass the session limit of %d bytes", next.live, s.opts.MaxSessionBytes)
	}
	if err := tmp.Sync(); err != nil {
		return session.CommitResult{}, session.FileError(err, df.path, "fsstore.Copy: session %q", dst)
	}
	f, err := tmp.Create()
	if err != nil {
		return session.CommitResult{}, session.FileError(err, df.path, "fsstore.Copy: session %q", dst)
	}
	s.adoptLog(df, recordlog.Adopt(f, df.path, size))
	if err := s.checkLock("fsstore.Copy"); err != nil {
		return session.CommitResult{}, err
	}
	df.size, df.t = size, next
	s.runs.drop()
	s.commits.Add(1)
	s.bytesWritten.Add(size)
	return session.CommitResult{Generation: 1, MessageCount: next.messages(), BytesWritten: size}, nil
}

// copyReplayed copies generation at of src by replaying it.
func (s *Store) copyReplayed(ctx context.Context, src, dst string, at uint64, then *session.Change) (session.CommitResult, error) {
	st, err := s.Load(ctx, src, at)
	if err != nil {
		return session.CommitResult{}, err
	}
	if then != nil {
		session.Apply(st, dst, then, st.Snapshot.Generation, st.Snapshot.UpdatedAt)
	}
	return s.Commit(ctx, dst, &session.Change{Replace: st.Snapshot}, session.CommitOptions{MustNotExist: true, Normalized: true})
}
