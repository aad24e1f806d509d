package engine

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/cairn-dev/cairn/api"
	"github.com/cairn-dev/cairn/internal/checked"
	"github.com/cairn-dev/cairn/session"
)

// maxRunIDAttempts bounds how often BeginRun and ResumeRun ask
// Options.NewRunID for an id that is not taken yet.
const maxRunIDAttempts = 16

// BeginRun starts a run in an existing session and returns its id: RunID
// when the host names one, else a fresh unique id. A run id that any session
// in the store already records is conflict; a session that does not exist
// is not_found.
func (e *Engine) BeginRun(ctx context.Context, req api.BeginRunRequest) (api.BeginRunResult, error) {
	sid := req.SessionID
	if err := e.checkSession(sid); err != nil {
		return api.BeginRunResult{}, err
	}
	if req.RunID != "" {
		if err := session.ValidateID("run", req.RunID); err != nil {
			return api.BeginRunResult{}, err
		}
	}
	e.runIDs.Lock()
	defer e.runIDs.Unlock()
	id, err := e.claimRunID(ctx, req.RunID)
	if err != nil {
		return api.BeginRunResult{}, err
	}
	// On a shared store the run is this host's from its first commit.
	if err := e.leases.acquire(ctx, session.LeaseKeyRun(id), false); err != nil {
		return api.BeginRunResult{}, wrapStore("BeginRun", err)
	}
	now := e.clock()
	res, _, err := e.updateHead(ctx, sid, func(st *session.State, _ session.Summary) (*session.Change, error) {
		if findRun(st, id) != nil {
			return nil, session.Errorf(session.CodeConflict, "run %q already exists in session %q", id, sid)
		}
		return &session.Change{UpsertRuns: []session.Run{{RunID: id, Status: session.RunRunning, StartedAt: now}}}, nil
	}, func(res session.CommitResult) []api.Event {
		return []api.Event{committedEvent(sid, res.Generation)}
	})
	if err != nil {
		return api.BeginRunResult{}, wrapStore("BeginRun", err)
	}
	e.homes.put(id, sid)
	return api.BeginRunResult{RunID: id, Generation: res.Generation}, nil
}

// claimRunID returns want when no session records it (conflict otherwise),
// or a fresh unused id when want is empty. The caller holds e.runIDs.
func (e *Engine) claimRunID(ctx context.Context, want string) (string, error) {
	if want != "" {
		sid, err := e.store.FindRun(ctx, want)
		switch {
		case err == nil:
			return "", session.Errorf(session.CodeConflict, "run %q already exists in session %q", want, sid)
		case !isCode(err, session.CodeNotFound):
			return "", wrapStore("find run", err)
		}
		return want, nil
	}
	for range maxRunIDAttempts {
		id := e.newID()
		if session.ValidateID("run", id) != nil {
			continue
		}
		_, err := e.store.FindRun(ctx, id)
		switch {
		case isCode(err, session.CodeNotFound):
			return id, nil
		case err != nil:
			return "", wrapStore("find run", err)
		}
	}
	return "", session.Errorf(session.CodeInternal, "engine: no unused run id after %d attempts; check Options.NewRunID", maxRunIDAttempts)
}

// Checkpoint records the boundary after a completed tool turn of a running
// run: it appends the turn's messages, records the loop checkpoint (turn,
// usage and tool-call totals, the host's state; the store fills in the
// message count at the boundary) and updates the run's usage and tool-call
// count, all in one atomic commit. Turns must strictly increase across a
// run's checkpoints, and a resumed run's first turn must follow the turn it
// resumed from (invalid_argument otherwise). A run that resumeRun
// superseded is not_owner, naming its successor; any other run that is not
// running is conflict; an unknown run is not_found. A resumed run's first
// checkpoint releases the checkpoint it was resumed from.
func (e *Engine) Checkpoint(ctx context.Context, req api.CheckpointRequest) (api.CheckpointResult, error) {
	if err := e.check(); err != nil {
		return api.CheckpointResult{}, err
	}
	if err := session.ValidateID("run", req.RunID); err != nil {
		return api.CheckpointResult{}, err
	}
	if req.Turn < 0 || req.ToolCallsCount < 0 {
		return api.CheckpointResult{}, session.Errorf(session.CodeInvalidArgument, "checkpoint: turn and tool_calls_count must not be negative")
	}
	now := e.clock()
	tmpl := session.Change{
		AppendMessages: req.NewMessages,
		Checkpoint: &session.LoopCheckpoint{
			RunID: req.RunID, Turn: req.Turn, Usage: req.Usage, ToolCallsCount: req.ToolCallsCount,
			State: req.State, CreatedAt: now,
		},
	}
	// Validate the host's input before looking anything up.
	if err := normalizeKnown(&tmpl, checked.Known(ctx)); err != nil {
		return api.CheckpointResult{}, err
	}
	key := session.LeaseKeyRun(req.RunID)
	f, err := e.leases.fence(ctx, key)
	if err != nil {
		return api.CheckpointResult{}, wrapStore("Checkpoint", err)
	}
	// The commit normalizes the change again (rmw): these values it need
	// not scan twice. (Those libcairn's decoder vouched for, ctx knows
	// already: then ctx is kept as it is.)
	ctx = checked.With(checked.With(ctx, tmpl.AppendMessages...), tmpl.Checkpoint.State)
	res, _, err := e.withRun(withFence(ctx, f), req.RunID, req.SessionID, func(st *session.State, run *session.Run) (*session.Change, error) {
		if next, head := successor(st, run); next != nil {
			return nil, supersededError("checkpoint", run, next, head)
		}
		if run.Status != session.RunRunning {
			return nil, session.Errorf(session.CodeConflict, "run %q is %s, not running; it cannot be checkpointed", run.RunID, run.Status)
		}
		c := tmpl
		cp := *tmpl.Checkpoint
		c.Checkpoint = &cp
		if prev := st.Checkpoints[run.RunID]; prev != nil {
			if req.Turn <= prev.Turn {
				return nil, session.Errorf(session.CodeInvalidArgument, "run %q: turn %d does not follow the checkpointed turn %d", run.RunID, req.Turn, prev.Turn)
			}
		} else if from := resumedFrom(st, run); from != nil {
			if req.Turn <= from.Turn {
				return nil, session.Errorf(session.CodeInvalidArgument, "run %q: turn %d does not follow turn %d it resumed from", run.RunID, req.Turn, from.Turn)
			}
			// The new run has its own boundary now; the one it resumed
			// from is consumed.
			c.DropCheckpoints = []string{run.ParentRunID}
		}
		r := *run
		r.Usage, r.ToolCallsCount = req.Usage, req.ToolCallsCount
		c.UpsertRuns = []session.Run{r}
		return &c, nil
	}, func(sid string, res session.CommitResult) []api.Event {
		return []api.Event{committedEvent(sid, res.Generation), api.NewEvent(api.EventRunCheckpointed, api.RunCheckpointedData{
			SessionID: sid, RunID: req.RunID, Turn: req.Turn, Generation: res.Generation,
		})}
	})
	if err != nil {
		e.leases.forget(key, err)
		return api.CheckpointResult{}, wrapStore("Checkpoint", err)
	}
	return api.CheckpointResult{Generation: res.Generation, MessageCount: res.MessageCount}, nil
}

// CompleteRun ends a run with status completed, failed or interrupted,
// records its end time (and final usage and tool-call count when given) and
// deletes its loop checkpoint in the same commit, so no checkpoint outlives
// its run. Ending a resumed run that had not checkpointed yet also releases
// the checkpoint it was resumed from. Completing a run again with the status
// it already ended with is a no-op that returns the current generation; a
// different final status is conflict. A run that resumeRun superseded is
// not_owner, naming its successor, whatever the status asked for: the
// successor owns the line (and the checkpoint it resumed from) now. An
// unknown run is not_found.
func (e *Engine) CompleteRun(ctx context.Context, req api.CompleteRunRequest) (api.CompleteRunResult, error) {
	if err := e.check(); err != nil {
		return api.CompleteRunResult{}, err
	}
	if err := session.ValidateID("run", req.RunID); err != nil {
		return api.CompleteRunResult{}, err
	}
	switch req.Status {
	case session.RunCompleted, session.RunFailed, session.RunInterrupted:
	default:
		return api.CompleteRunResult{}, session.Errorf(session.CodeInvalidArgument, "completeRun: status %q is not one of completed, failed, interrupted", req.Status)
	}
	if req.ToolCallsCount != nil && *req.ToolCallsCount < 0 {
		return api.CompleteRunResult{}, session.Errorf(session.CodeInvalidArgument, "completeRun: tool_calls_count must not be negative")
	}
	now := e.clock()
	var gen uint64
	key := session.LeaseKeyRun(req.RunID)
	f, err := e.leases.fence(ctx, key)
	if err != nil {
		return api.CompleteRunResult{}, wrapStore("CompleteRun", err)
	}
	res, committed, err := e.withRun(withFence(ctx, f), req.RunID, req.SessionID, func(st *session.State, run *session.Run) (*session.Change, error) {
		if next, head := successor(st, run); next != nil {
			return nil, supersededError("completeRun", run, next, head)
		}
		own := st.Checkpoints[run.RunID]
		if run.Status == req.Status && run.EndedAt != nil && own == nil {
			gen = st.Snapshot.Generation
			return nil, nil // already ended this way: idempotent
		}
		if run.Status == session.RunCompleted || run.Status == session.RunFailed {
			return nil, session.Errorf(session.CodeConflict, "run %q already ended as %s", run.RunID, run.Status)
		}
		c := &session.Change{}
		if own != nil {
			c.DropCheckpoints = append(c.DropCheckpoints, run.RunID)
		} else if run.Status == session.RunRunning && resumedFrom(st, run) != nil {
			c.DropCheckpoints = append(c.DropCheckpoints, run.ParentRunID)
		}
		r := *run
		r.Status = req.Status
		if r.EndedAt == nil || run.Status == session.RunRunning {
			t := now
			r.EndedAt = &t
		}
		if req.Usage != nil {
			r.Usage = *req.Usage
		}
		if req.ToolCallsCount != nil {
			r.ToolCallsCount = *req.ToolCallsCount
		}
		c.UpsertRuns = []session.Run{r}
		return c, nil
	}, func(sid string, res session.CommitResult) []api.Event {
		return []api.Event{committedEvent(sid, res.Generation), api.NewEvent(api.EventRunCompleted, api.RunCompletedData{
			SessionID: sid, RunID: req.RunID, Status: req.Status, Generation: res.Generation,
		})}
	})
	if err != nil {
		e.leases.forget(key, err)
		return api.CompleteRunResult{}, wrapStore("CompleteRun", err)
	}
	e.homes.forget(req.RunID)
	if committed {
		gen = res.Generation
	}
	// The run is over, or given up: another host may resume an
	// interrupted run without a takeover.
	e.leases.release(ctx, key)
	return api.CompleteRunResult{Generation: gen}, nil
}

// ResumeRun continues a run from its latest loop checkpoint. It creates a
// new run (NewRunID, or a fresh id) with parent_run_id set to the resumed
// run and with the checkpoint's usage and tool-call count, marks the
// resumed run interrupted, and returns the session's messages up to the
// boundary with the turn, usage, tool-call count and loop state to carry
// on from. Usage and counts continue from the checkpoint, never from zero.
//
// Errors, with no fallback of any kind: no_checkpoint when the run is
// unknown, has ended, or has no checkpoint (a resumed run's successor that
// has checkpointed since consumed it: resume the successor); not_owner when
// SessionID names a session that does not record the run; conflict when
// NewRunID is taken by another run.
//
// The resumed run's checkpoint is kept until the new run's first checkpoint
// (or its end), so a host that crashes before that can resume the same
// boundary again. Resuming with the NewRunID of the successor that has not
// checkpointed yet is idempotent: the same run and result come back and
// nothing is written. Resuming again with another id (or none) supersedes
// that successor: it is marked interrupted and a new run starts from the
// same boundary.
func (e *Engine) ResumeRun(ctx context.Context, req api.ResumeRunRequest) (*api.ResumeRunResult, error) {
	if err := e.check(); err != nil {
		return nil, err
	}
	if err := session.ValidateID("run", req.RunID); err != nil {
		return nil, err
	}
	if req.SessionID != "" {
		if err := session.ValidateID("session", req.SessionID); err != nil {
			return nil, err
		}
	}
	if req.NewRunID != "" {
		if err := session.ValidateID("run", req.NewRunID); err != nil {
			return nil, err
		}
		if req.NewRunID == req.RunID {
			return nil, session.Errorf(session.CodeInvalidArgument, "resumeRun: new_run_id must differ from run_id")
		}
	}
	e.runIDs.Lock()
	defer e.runIDs.Unlock()

	sid := req.SessionID
	if sid == "" {
		cp, err := e.store.Checkpoint(ctx, req.RunID)
		switch {
		case isCode(err, session.CodeNoCheckpoint), isCode(err, session.CodeNotFound):
			// Look at the run's record anyway, so the error says why
			// (ended, or superseded: then it names the successor). The
			// session's head answers with no_checkpoint and writes nothing.
			if sid, err = e.store.FindRun(ctx, req.RunID); err != nil {
				return nil, session.Errorf(session.CodeNoCheckpoint, "run %q has no loop checkpoint (unknown run)", req.RunID)
			}
		case err != nil:
			return nil, wrapStore("ResumeRun", err)
		default:
			sid = cp.SessionID
		}
	}
	newID := req.NewRunID
	if newID == "" {
		var err error
		if newID, err = e.claimRunID(ctx, ""); err != nil {
			return nil, err
		}
	}

	// On a shared store, take the resumed run's lease first: from a host
	// whose lease expired, or from any host when the caller says it is
	// gone. Its token goes up, so that host's later writes are refused; the
	// resume's own commit is fenced by it, so of two hosts taking the run
	// over at once only the later holder's resume lands.
	oldKey := session.LeaseKeyRun(req.RunID)
	if err := e.leases.acquire(ctx, oldKey, req.Takeover); err != nil {
		return nil, wrapStore("ResumeRun", err)
	}
	f, err := e.leases.fence(ctx, oldKey)
	if err != nil {
		return nil, wrapStore("ResumeRun", err)
	}
	fctx := withFence(ctx, f)
	now := e.clock()
	var out *api.ResumeRunResult
	var boundary *session.ManifestRef
	_, _, err = e.updateHead(fctx, sid, func(st *session.State, sum session.Summary) (*session.Change, error) {
		out = nil
		run := findRun(st, req.RunID)
		if run == nil {
			if req.SessionID != "" && e.runExists(ctx, req.RunID) {
				return nil, session.Errorf(session.CodeNotOwner, "run %q does not belong to session %q", req.RunID, sid)
			}
			return nil, session.Errorf(session.CodeNoCheckpoint, "run %q has no loop checkpoint (unknown run)", req.RunID)
		}
		cp := st.Checkpoints[run.RunID]
		if cp == nil || run.Status == session.RunCompleted || run.Status == session.RunFailed {
			if next, head := successor(st, run); next != nil {
				return nil, session.Errorf(session.CodeNoCheckpoint, "run %q has no loop checkpoint: it was superseded by resumeRun as run %q%s, which has moved on; resume that line", run.RunID, next.RunID, lineNote(next, head))
			}
			return nil, session.Errorf(session.CodeNoCheckpoint, "run %q has no loop checkpoint (status %s)", run.RunID, run.Status)
		}
		if cp.MessageCount < 0 || cp.MessageCount > sum.MessageCount {
			return nil, session.Errorf(session.CodeInternal, "run %q: checkpoint boundary %d is past the session's %d messages", run.RunID, cp.MessageCount, sum.MessageCount)
		}
		again := false
		if existing := findRun(st, newID); existing != nil {
			if existing.ParentRunID != run.RunID || existing.Status != session.RunRunning || st.Checkpoints[newID] != nil {
				return nil, session.Errorf(session.CodeConflict, "run %q already exists in session %q", newID, sid)
			}
			again = true // the same resume again: idempotent, nothing to write
		} else if req.NewRunID != "" {
			// A host-chosen id that another session records is taken.
			if _, err := e.claimRunID(ctx, newID); err != nil {
				return nil, err
			}
		}
		// Only the messages up to the boundary are read, and only once the
		// resume is known to go ahead.
		msgs, err := e.messagesTo(ctx, sid, st.Snapshot.Generation, cp.MessageCount)
		if err != nil {
			return nil, err
		}
		boundary = cp.Files
		out = &api.ResumeRunResult{
			RunID:                       newID,
			ResumedFrom:                 run.RunID,
			SessionID:                   sid,
			Messages:                    msgs,
			Turn:                        cp.Turn,
			Usage:                       cp.Usage,
			ToolCallsCount:              cp.ToolCallsCount,
			State:                       cloneValue(cp.State),
			FilesTouchedAfterCheckpoint: []string{},
			FilesTracked:                false,
		}
		if again {
			return nil, nil
		}
		old := *run
		old.Status = session.RunInterrupted
		if old.EndedAt == nil {
			t := now
			old.EndedAt = &t
		}
		runs := []session.Run{old}
		// A successor that never checkpointed is superseded by this resume.
		for _, r := range st.Snapshot.Runs {
			if r.ParentRunID == run.RunID && r.Status == session.RunRunning && st.Checkpoints[r.RunID] == nil {
				t := now
				r.Status, r.EndedAt = session.RunInterrupted, &t
				runs = append(runs, r)
			}
		}
		runs = append(runs, session.Run{
			RunID:          newID,
			Status:         session.RunRunning,
			ParentRunID:    run.RunID,
			StartedAt:      now,
			Usage:          cp.Usage,
			ToolCallsCount: cp.ToolCallsCount,
		})
		return &session.Change{UpsertRuns: runs}, nil
	}, func(res session.CommitResult) []api.Event {
		return []api.Event{committedEvent(sid, res.Generation), api.NewEvent(api.EventRunResumed, api.RunResumedData{
			SessionID: sid, RunID: newID, ResumedFrom: req.RunID, Generation: res.Generation,
		})}
	})
	if err != nil {
		e.leases.forget(oldKey, err)
		return nil, wrapStore("ResumeRun", err)
	}
	e.homes.forget(req.RunID)
	e.homes.put(newID, sid)
	if err := e.leases.acquire(ctx, session.LeaseKeyRun(newID), false); err != nil {
		return nil, wrapStore("ResumeRun", err)
	}
	// The run died (or was abandoned) after its last checkpoint: whatever
	// changed in the workspace since that boundary may be a tool call that
	// half-happened.
	if boundary != nil {
		if d := e.drift(ctx, boundary); d.Tracked {
			out.FilesTracked = true
			out.FilesTouchedAfterCheckpoint = touched(d)
		}
	}
	return out, nil
}

// errNotRunningHere makes withRun look for the session where a run is
// running; it never reaches a caller.
var errNotRunningHere = errors.New("engine: run is not running in the guessed session")

// withRun runs updateHead on the session that records runID, passing build
// that session's head and the run's record (an unknown run is not_found;
// a session named by hint that does not record it is not_owner). after
// runs as update's after, with the session id.
//
// The session is hint when the caller named one; else the one holding the
// run's loop checkpoint; else the one the store's FindRun reports. A run id
// can be recorded by more than one session when a fork or an import copied
// it (the copies are never running), so when FindRun's answer does not
// have the run running, the sessions with running runs are searched for the
// one that does before settling for FindRun's answer.
//
// Before any of that, a run this engine committed in lately is looked for
// in the session it was committed in (runHomes), as FindRun's answer is:
// where it is running, it is running nowhere else (a run id is begun in
// one session, and copies are never running), and that costs no look
// through every session of the store. A session that no longer records
// it (deleted, or replaced) sends the operation the long way.
func (e *Engine) withRun(ctx context.Context, runID, hint string,
	build func(st *session.State, run *session.Run) (*session.Change, error),
	after func(sid string, res session.CommitResult) []api.Event,
) (session.CommitResult, bool, error) {
	var sid string
	var guessed, remembered bool
	var err error
	if hint == "" {
		sid, remembered = e.homes.get(runID)
		guessed = remembered
	}
	if !remembered {
		if sid, guessed, err = e.locateRun(ctx, runID, hint); err != nil {
			return session.CommitResult{}, false, err
		}
	}
	for {
		res, ok, err := e.updateHead(ctx, sid, func(st *session.State, _ session.Summary) (*session.Change, error) {
			run, err := e.runIn(ctx, st, runID, hint)
			if err != nil {
				return nil, err
			}
			if guessed && run.Status != session.RunRunning {
				return nil, errNotRunningHere
			}
			return build(st, run)
		}, func(res session.CommitResult) []api.Event { return after(sid, res) })
		if remembered && isCode(err, session.CodeNotFound) {
			e.homes.forget(runID)
			remembered = false
			if sid, guessed, err = e.locateRun(ctx, runID, hint); err != nil {
				return session.CommitResult{}, false, err
			}
			continue
		}
		if !errors.Is(err, errNotRunningHere) {
			if err == nil {
				e.homes.put(runID, sid)
			}
			return res, ok, err
		}
		guessed = false
		alt, err := e.findRunning(ctx, runID, sid)
		if err != nil {
			return res, false, err
		}
		if alt != "" {
			sid = alt
		}
	}
}

// locateRun returns the session a run operation should address first, and
// whether it is only FindRun's guess (see withRun).
func (e *Engine) locateRun(ctx context.Context, runID, hint string) (sid string, guessed bool, err error) {
	if hint != "" {
		return hint, false, session.ValidateID("session", hint)
	}
	sid, err = checkpointSession(ctx, e.store, runID)
	switch {
	case err == nil:
		return sid, false, nil
	case !isCode(err, session.CodeNoCheckpoint) && !isCode(err, session.CodeNotFound):
		return "", false, wrapStore("find checkpoint", err)
	}
	sid, err = e.store.FindRun(ctx, runID)
	if err != nil {
		return "", false, wrapStore("find run", err)
	}
	return sid, true, nil
}

// checkpointOwner is a store that names the session holding a run's
// checkpoint without reading the checkpoint (fsstore: from its index).
type checkpointOwner interface {
	CheckpointSession(ctx context.Context, runID string) (string, error)
}

// checkpointSession returns the session holding runID's checkpoint.
func checkpointSession(ctx context.Context, st session.Store, runID string) (string, error) {
	if o, ok := st.(checkpointOwner); ok {
		return o.CheckpointSession(ctx, runID)
	}
	cp, err := st.Checkpoint(ctx, runID)
	if err != nil {
		return "", err
	}
	return cp.SessionID, nil
}

// findRunning returns a session other than except where runID is running,
// or "". It reads the head (runs, no content) of only the sessions that
// have running runs.
func (e *Engine) findRunning(ctx context.Context, runID, except string) (string, error) {
	sums, err := e.store.List(ctx)
	if err != nil {
		return "", wrapStore("list sessions", err)
	}
	for _, s := range sums {
		if s.SessionID == except || s.Runs[session.RunRunning] == 0 {
			continue
		}
		st, _, err := e.store.Head(ctx, s.SessionID)
		if err != nil {
			continue // deleted meanwhile
		}
		if r := findRun(st, runID); r != nil && r.Status == session.RunRunning {
			return s.SessionID, nil
		}
	}
	return "", nil
}

// runIn returns the run's record in st. When the session does not record
// it, the error is not_owner if the caller named that session and some
// other session records the run, else not_found.
func (e *Engine) runIn(ctx context.Context, st *session.State, runID, hint string) (*session.Run, error) {
	if r := findRun(st, runID); r != nil {
		return r, nil
	}
	if hint != "" && e.runExists(ctx, runID) {
		return nil, session.Errorf(session.CodeNotOwner, "run %q does not belong to session %q", runID, st.Snapshot.SessionID)
	}
	return nil, session.Errorf(session.CodeNotFound, "run %q not found", runID)
}

// runExists reports whether any session records runID. A store error
// counts as "no": the caller then reports the weaker not_found.
func (e *Engine) runExists(ctx context.Context, runID string) bool {
	_, err := e.store.FindRun(ctx, runID)
	return err == nil
}

// findRun returns a pointer to the run's record in st, or nil.
func findRun(st *session.State, runID string) *session.Run {
	if st == nil || st.Snapshot == nil {
		return nil
	}
	for i := range st.Snapshot.Runs {
		if st.Snapshot.Runs[i].RunID == runID {
			return &st.Snapshot.Runs[i]
		}
	}
	return nil
}

// resumedFrom returns the checkpoint run was resumed from when run is the
// pending successor of a resume (running, no checkpoint of its own yet,
// its parent's checkpoint still kept), or nil.
func resumedFrom(st *session.State, run *session.Run) *session.LoopCheckpoint {
	if run.ParentRunID == "" || run.Status != session.RunRunning || st.Checkpoints[run.RunID] != nil {
		return nil
	}
	parent := findRun(st, run.ParentRunID)
	if parent == nil || parent.Status != session.RunInterrupted {
		return nil
	}
	return st.Checkpoints[run.ParentRunID]
}

// pendingSuccessor returns the run that resumed runID and has not
// checkpointed yet, or nil.
func pendingSuccessor(st *session.State, runID string) *session.Run {
	var out *session.Run
	for i := range st.Snapshot.Runs {
		r := &st.Snapshot.Runs[i]
		if r.ParentRunID == runID && r.Status == session.RunRunning && st.Checkpoints[r.RunID] == nil {
			out = r
		}
	}
	return out
}

// lastChild returns the most recent run resumed from runID, or nil.
func lastChild(st *session.State, runID string) *session.Run {
	var out *session.Run
	for i := range st.Snapshot.Runs {
		if st.Snapshot.Runs[i].ParentRunID == runID {
			out = &st.Snapshot.Runs[i]
		}
	}
	return out
}

// successor returns the run that superseded run through resumeRun, and
// the latest run of that line (head, the same run when the line has not
// moved on), or nil, nil when run was not superseded. A run that was
// resumed is superseded by the latest run resumed from it; a pending
// successor that a later resume of the same run replaced is superseded by
// that later run.
func successor(st *session.State, run *session.Run) (next, head *session.Run) {
	next = lastChild(st, run.RunID)
	if next == nil && run.ParentRunID != "" {
		if sib := lastChild(st, run.ParentRunID); sib != nil && sib.RunID != run.RunID {
			next = sib
		}
	}
	if next == nil {
		return nil, nil
	}
	head = next
	// Bounded: a whole-snapshot save may record parent links in a cycle.
	for range st.Snapshot.Runs {
		c := lastChild(st, head.RunID)
		if c == nil {
			break
		}
		head = c
	}
	return next, head
}

// supersededError is the not_owner error of op on a run that resumeRun
// superseded: it names the successor and, when the line has moved on past
// it, the line's latest run.
func supersededError(op string, run, next, head *session.Run) error {
	return session.Errorf(session.CodeNotOwner, "%s: run %q was superseded by resumeRun: its successor is run %q%s; address that line instead",
		op, run.RunID, next.RunID, lineNote(next, head))
}

func lineNote(next, head *session.Run) string {
	if head == nil || head.RunID == next.RunID {
		return ""
	}
	return fmt.Sprintf(" (the line's latest run is %q)", head.RunID)
}

// messagesTo reads the session's messages [0, n) as of generation gen,
// page by page. errStale when the session is no longer at gen.
func (e *Engine) messagesTo(ctx context.Context, sid string, gen uint64, n int64) ([]session.Value, error) {
	out := make([]session.Value, 0, n)
	for int64(len(out)) < n {
		p, err := e.store.Messages(ctx, sid, session.Query{From: int64(len(out)), To: n})
		if err != nil {
			return nil, wrapStore("read messages", err)
		}
		if p.Generation != gen {
			return nil, errStale
		}
		if p.From != int64(len(out)) || len(p.Items) == 0 || int64(len(out)+len(p.Items)) > n {
			return nil, session.Errorf(session.CodeInternal, "session %q: the store answered messages %d..%d for a read of %d..%d", sid, p.From, p.Next, len(out), n)
		}
		out = append(out, p.Items...)
	}
	return out, nil
}

// cloneValue copies an opaque value, so a caller that modifies what it was
// handed cannot reach a copy the store may share.
func cloneValue(v session.Value) session.Value {
	if v == nil {
		return nil
	}
	return append(session.Value(nil), v...)
}

// runHomes maps the ids of the runs this engine committed in lately to
// their sessions (see withRun). It holds at most maxRunHomes: when full,
// it starts again empty. A run that ends is forgotten.
type runHomes struct {
	mu sync.Mutex
	m  map[string]string
}

const maxRunHomes = 4096

func (h *runHomes) get(run string) (string, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	sid, ok := h.m[run]
	return sid, ok
}

func (h *runHomes) put(run, sid string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.m == nil || len(h.m) >= maxRunHomes {
		h.m = make(map[string]string)
	}
	h.m[run] = sid
}

func (h *runHomes) forget(run string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.m, run)
}
