package engine

import (
	"bytes"
	"context"
	"maps"

	"github.com/cairn-dev/cairn/api"
	"github.com/cairn-dev/cairn/session"
)

// Save commits a whole snapshot or a delta as the session's next generation
// and returns that generation. It creates the session when it does not
// exist. The change is validated (session.Normalize: schema, JSON values,
// ids, statuses, artifact digests, secret-named keys dropped) before
// anything is written; the caller's request is not modified.
//
// ExpectGeneration makes the save a compare-and-swap: it fails with
// conflict, writing nothing, unless the session is at exactly that
// generation (0: the session must not exist yet).
//
// Loop checkpoints are the business of Checkpoint, CompleteRun and
// ResumeRun, so a change that carries Checkpoint or DropCheckpoints is
// invalid_argument. Save keeps checkpoints consistent with the runs it
// writes: a run saved as completed or failed loses its checkpoint in the
// same commit, and a whole snapshot drops the checkpoints of runs it no
// longer lists as running or interrupted and of boundaries past its last
// message.
func (e *Engine) Save(ctx context.Context, req api.SaveRequest) (api.SaveResult, error) {
	sid := req.SessionID
	if err := e.checkSession(sid); err != nil {
		return api.SaveResult{}, err
	}
	var c *session.Change
	switch {
	case req.Snapshot != nil && req.Change != nil:
		return api.SaveResult{}, session.Errorf(session.CodeInvalidArgument, "save: give a snapshot or a change, not both")
	case req.Snapshot != nil:
		if req.Snapshot.SessionID != "" && req.Snapshot.SessionID != sid {
			return api.SaveResult{}, session.Errorf(session.CodeInvalidArgument,
				"save: snapshot.session_id %q does not match session_id %q (use fork to copy a session)", req.Snapshot.SessionID, sid)
		}
		c = &session.Change{Replace: session.CloneSnapshot(req.Snapshot)}
	case req.Change != nil:
		c = cloneChange(req.Change)
	default:
		return api.SaveResult{}, session.Errorf(session.CodeInvalidArgument, "save: neither a snapshot nor a change was given")
	}
	if c.Checkpoint != nil || len(c.DropCheckpoints) > 0 {
		return api.SaveResult{}, session.Errorf(session.CodeInvalidArgument,
			"save: loop checkpoints are written by checkpoint and completeRun, not by save")
	}
	if c.Replace != nil {
		// Validated in update, after it is reduced to a delta where it can
		// be: a host that saves its whole session each turn pays for what
		// it added, not for the session.
		return e.saveSnapshot(ctx, sid, c, req.ExpectGeneration)
	}
	if err := normalize(c); err != nil {
		return api.SaveResult{}, err
	}

	// A delta needs no read: the store applies it to whatever the latest
	// generation is (or checks ExpectGeneration atomically).
	for _, r := range c.UpsertRuns {
		if r.Status == session.RunCompleted || r.Status == session.RunFailed {
			c.DropCheckpoints = append(c.DropCheckpoints, r.RunID)
		}
	}
	unlock := e.sessions.lock(sid)
	defer unlock()
	e.stamp(ctx, c)
	events := func(res session.CommitResult) []api.Event { return []api.Event{committedEvent(sid, res.Generation)} }
	res, err := e.store.Commit(ctx, sid, c, session.CommitOptions{ExpectGeneration: req.ExpectGeneration, Normalized: true, Notify: e.notifyWith(events)})
	if err != nil {
		return api.SaveResult{}, wrapStore("Save", err)
	}
	e.emit(res, events)
	return api.SaveResult{Generation: res.Generation}, nil
}

// saveSnapshot commits a whole snapshot, dropping the checkpoints it makes
// stale. It reads the current state under the session lock, and commits
// only the difference (session.Diff) when a delta can express it, so the
// commit costs what the snapshot added; otherwise it commits the snapshot
// as a replace. Either way the result is the same generation.
func (e *Engine) saveSnapshot(ctx context.Context, sid string, replace *session.Change, expect *uint64) (api.SaveResult, error) {
	snap := replace.Replace
	status := make(map[string]string, len(snap.Runs))
	for _, r := range snap.Runs {
		status[r.RunID] = r.Status
	}
	res, _, err := e.update(ctx, sid, true, func(st *session.State) (*session.Change, error) {
		var cur uint64
		if st != nil {
			cur = st.Snapshot.Generation
		}
		if expect != nil && *expect != cur {
			return nil, session.Errorf(session.CodeConflict, "session %q is at generation %d, not the expected %d", sid, cur, *expect)
		}
		c := replace
		if st != nil {
			if d, ok := session.Diff(st.Snapshot, snap); ok {
				c = d
			}
		}
		c.DropCheckpoints = nil
		if st != nil {
			for _, id := range sortedKeys(st.Checkpoints) {
				s := status[id]
				live := s == session.RunRunning || s == session.RunInterrupted
				if !live || st.Checkpoints[id].MessageCount > int64(len(snap.Messages)) {
					c.DropCheckpoints = append(c.DropCheckpoints, id)
				}
			}
		}
		return c, nil
	}, func(res session.CommitResult) []api.Event {
		return []api.Event{committedEvent(sid, res.Generation)}
	})
	if err != nil {
		return api.SaveResult{}, wrapStore("Save", err)
	}
	return api.SaveResult{Generation: res.Generation}, nil
}

// ResumeSession returns the latest generation of the session: its snapshot,
// generation, workspace drift and the runs that can be resumed. It is
// ResumeSessionWith without options, and is too_large when the session
// is larger than the reply size limit (Options.MaxReplyBytes).
//
// api.Drift names the workspace files added, modified and deleted since the
// generation was saved, compared with the workspace as it is now (exact
// even when nothing watched in between). It is reported as not tracked,
// with the reason, when the engine has no workspace tracker or the
// generation has no usable manifest: the engine never claims "no drift"
// when it does not know.
//
// InterruptedRuns lists, in the snapshot's run order, every run that still
// has a loop checkpoint: runs left running (a crashed or still-working
// host), and runs already resumed whose successor has not checkpointed yet
// (Status interrupted, ResumedAs naming the successor); both are resumed
// with ResumeRun on the listed run id.
func (e *Engine) ResumeSession(ctx context.Context, sessionID string) (*api.ResumeSessionResult, error) {
	return e.ResumeSessionWith(ctx, api.ResumeSessionRequest{SessionID: sessionID})
}

func interruptedRuns(st *session.State) []api.InterruptedRun {
	out := []api.InterruptedRun{}
	for _, r := range st.Snapshot.Runs {
		cp := st.Checkpoints[r.RunID]
		if cp == nil || (r.Status != session.RunRunning && r.Status != session.RunInterrupted) {
			continue
		}
		ir := api.InterruptedRun{
			RunID:          r.RunID,
			Status:         r.Status,
			Turn:           cp.Turn,
			MessageCount:   cp.MessageCount,
			Usage:          cp.Usage,
			ToolCallsCount: cp.ToolCallsCount,
			CheckpointedAt: cp.CreatedAt,
		}
		if child := pendingSuccessor(st, r.RunID); child != nil {
			ir.ResumedAs = child.RunID
		}
		out = append(out, ir)
	}
	return out
}

// List describes every session (id, generation, times, message count, run
// counts by status, checkpoints, size), ordered by session id.
func (e *Engine) List(ctx context.Context) ([]session.Summary, error) {
	if err := e.check(); err != nil {
		return nil, err
	}
	out, err := e.store.List(ctx)
	if err != nil {
		return nil, wrapStore("List", err)
	}
	if out == nil {
		out = []session.Summary{}
	}
	return out, nil
}

// Delete removes the session with everything that belongs to it: all its
// generations, its runs' loop checkpoints and the workflows it owns.
// not_found when there is no such session.
func (e *Engine) Delete(ctx context.Context, sessionID string) error {
	if err := e.checkSession(sessionID); err != nil {
		return err
	}
	unlock := e.sessions.lock(sessionID)
	defer unlock()
	if err := e.store.Delete(ctx, sessionID); err != nil {
		return wrapStore("Delete", err)
	}
	e.publishOut(ctx, api.NewEvent(api.EventSessionDeleted, api.SessionDeletedData{SessionID: sessionID}))
	return nil
}

// Fork copies the session as of generation AtGeneration (0: the latest) to
// the new id NewID, as that session's generation 1, and returns it. It
// fails with conflict when NewID exists and not_found when the source or
// that generation does not.
//
// A fork never shares a live run with its source: loop checkpoints are not
// copied, and runs copied with status running are recorded as interrupted
// in the fork, so a run id keeps resolving to the session that is actually
// running it. The fork's created_at is the time of the fork.
func (e *Engine) Fork(ctx context.Context, req api.ForkRequest) (api.ForkResult, error) {
	if err := e.checkSession(req.SessionID); err != nil {
		return api.ForkResult{}, err
	}
	if err := session.ValidateID("session", req.NewID); err != nil {
		return api.ForkResult{}, err
	}
	unlock := e.sessions.lock(req.NewID)
	defer unlock()
	// The copy is made inside the store: the engine reads only the runs
	// (from the head, or from the forked generation when it is an earlier
	// one) to mark the running ones interrupted in the copy. The copy is
	// pinned to the generation the runs were read at; one compacted away
	// in between is read again.
	var res session.CommitResult
	for attempt := 0; ; attempt++ {
		head, sum, err := e.store.Head(ctx, req.SessionID)
		if err != nil {
			return api.ForkResult{}, wrapStore("Fork", err)
		}
		at, runs := sum.Generation, head.Snapshot.Runs
		if req.AtGeneration != 0 && req.AtGeneration != at {
			if req.AtGeneration > at {
				return api.ForkResult{}, session.Errorf(session.CodeNotFound, "session %q has no generation %d (latest is %d)", req.SessionID, req.AtGeneration, at)
			}
			old, err := e.store.Load(ctx, req.SessionID, req.AtGeneration)
			if err != nil {
				return api.ForkResult{}, wrapStore("Fork", err)
			}
			at, runs = req.AtGeneration, old.Snapshot.Runs
			head = old
		}
		then := scrubCopy(head.Snapshot)
		for _, r := range runs {
			if r.Status == session.RunRunning {
				if then == nil {
					then = &session.Change{}
				}
				r.Status = session.RunInterrupted
				then.UpsertRuns = append(then.UpsertRuns, r)
			}
		}
		if then != nil {
			if err := normalize(then); err != nil {
				return api.ForkResult{}, err
			}
		}
		res, err = e.store.Copy(ctx, req.SessionID, req.NewID, at, then)
		if err != nil && isCode(err, session.CodeNotFound) && req.AtGeneration == 0 && attempt < 3 {
			if _, serr := e.store.Stat(ctx, req.SessionID); serr == nil {
				continue
			}
		}
		if err != nil {
			return api.ForkResult{}, wrapStore("Fork", err)
		}
		break
	}
	e.publishOut(ctx, committedEvent(req.NewID, res.Generation))
	return api.ForkResult{SessionID: req.NewID, Generation: res.Generation}, nil
}

// cloneChange copies the parts of c that session.Normalize rewrites in
// place (maps it scrubs, slices whose elements it normalises, the snapshot
// and the checkpoint), so Save never modifies its caller's request. Opaque
// values are shared: nothing modifies them.
func cloneChange(c *session.Change) *session.Change {
	out := *c
	out.Replace = session.CloneSnapshot(c.Replace)
	if c.Agent != nil {
		out.Agent = maps.Clone(c.Agent)
	}
	if c.Metadata != nil {
		out.Metadata = maps.Clone(c.Metadata)
	}
	out.AppendTraces = append([]session.Trace(nil), c.AppendTraces...)
	out.AppendArtifacts = append([]session.Artifact(nil), c.AppendArtifacts...)
	out.PutArtifacts = append([]session.Artifact(nil), c.PutArtifacts...)
	out.UpsertRuns = append([]session.Run(nil), c.UpsertRuns...)
	out.DropCheckpoints = append([]string(nil), c.DropCheckpoints...)
	if c.Checkpoint != nil {
		cp := *c.Checkpoint
		out.Checkpoint = &cp
	}
	return &out
}

// scrubCopy returns the delta that brings a copy of s under the secret
// rules (session/secrets.go), or nil when s is already under them. A
// session written before the rules grew holds values they now drop; a
// fork does not copy them. Artifact metadata is copied as it is stored.
func scrubCopy(s *session.Snapshot) *session.Change {
	var c *session.Change
	if s.Agent != nil {
		agent := maps.Clone(s.Agent)
		session.ScrubMap(agent, false)
		if !maps.EqualFunc(agent, s.Agent, func(a, b session.Value) bool { return bytes.Equal(a, b) }) {
			c = &session.Change{Agent: agent}
		}
	}
	meta := maps.Clone(s.Metadata)
	session.ScrubMap(meta, false)
	for k, v := range s.Metadata {
		w, kept := meta[k]
		if kept && bytes.Equal(w, v) {
			continue
		}
		if c == nil {
			c = &session.Change{}
		}
		if c.Metadata == nil {
			c.Metadata = map[string]session.Value{}
		}
		if !kept {
			w = session.Value("null")
		}
		c.Metadata[k] = w
	}
	return c
}
