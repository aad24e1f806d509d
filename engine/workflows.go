package engine

import (
	"context"
	"strings"

	"github.com/cairn-dev/cairn/api"
	"github.com/cairn-dev/cairn/session"
)

// BeginWorkflow opens or reopens a resumable workflow and returns the steps
// of the given spec that are already done, in spec order, with their
// results. It writes nothing.
//
// It fails closed: if any recorded step has an identity different from the
// one in the spec given now, the whole call fails with
// step_identity_changed and the host must run nothing (finish the workflow
// to start over). Recorded steps that the spec no longer lists are ignored.
// When SessionID is given the session must exist (not_found), and a
// workflow owned by another session is not_owner.
func (e *Engine) BeginWorkflow(ctx context.Context, req api.BeginWorkflowRequest) (api.BeginWorkflowResult, error) {
	if err := e.check(); err != nil {
		return api.BeginWorkflowResult{}, err
	}
	if err := session.ValidateID("workflow", req.WorkflowID); err != nil {
		return api.BeginWorkflowResult{}, err
	}
	seen := make(map[string]bool, len(req.Steps))
	for _, s := range req.Steps {
		if err := session.ValidateID("step", s.StepID); err != nil {
			return api.BeginWorkflowResult{}, err
		}
		if s.Identity == "" {
			return api.BeginWorkflowResult{}, session.Errorf(session.CodeInvalidArgument, "workflow %q: step %q has an empty identity", req.WorkflowID, s.StepID)
		}
		if seen[s.StepID] {
			return api.BeginWorkflowResult{}, session.Errorf(session.CodeInvalidArgument, "workflow %q: step %q appears twice in the spec", req.WorkflowID, s.StepID)
		}
		seen[s.StepID] = true
	}
	w, err := e.loadWorkflow(ctx, "BeginWorkflow", req.WorkflowID, req.SessionID)
	if err != nil {
		return api.BeginWorkflowResult{}, err
	}
	// On a shared store the host that begins a workflow holds it: from
	// then on another host's steps are refused (not_owner).
	if err := e.leases.acquire(ctx, session.LeaseKeyWorkflow(req.WorkflowID), req.Takeover); err != nil {
		return api.BeginWorkflowResult{}, wrapStore("BeginWorkflow", err)
	}
	out := api.BeginWorkflowResult{Completed: []session.StepRecord{}}
	if w == nil {
		return out, nil
	}
	var changed []string
	for _, s := range req.Steps {
		rec := w.Step(s.StepID)
		switch {
		case rec == nil:
		case rec.Identity != s.Identity:
			changed = append(changed, s.StepID)
		default:
			out.Completed = append(out.Completed, *rec)
		}
	}
	if len(changed) > 0 {
		return api.BeginWorkflowResult{}, session.Errorf(session.CodeStepIdentityChanged,
			"workflow %q: recorded step(s) %s have a different identity from the spec given now; nothing may run (finish the workflow to start over)",
			req.WorkflowID, strings.Join(changed, ", "))
	}
	return out, nil
}

// CompleteStep records one successful step with its result. It is durable
// when it returns. The workflow checkpoint is created on the first step,
// owned by SessionID when given (the session must exist), so deleting that
// session deletes the workflow. Recording a step again with the same
// identity replaces its record; with a different identity it is
// step_identity_changed. Only successes are recorded: a failed step is
// simply not completed.
func (e *Engine) CompleteStep(ctx context.Context, req api.CompleteStepRequest) error {
	if err := e.check(); err != nil {
		return err
	}
	rec := session.StepRecord{StepID: req.StepID, Identity: req.Identity, Result: req.Result, CompletedAt: e.clock()}
	if err := session.NormalizeStep(req.WorkflowID, &rec); err != nil {
		return err
	}
	unlock := e.workflows.lock(req.WorkflowID)
	defer unlock()
	w, err := e.loadWorkflow(ctx, "CompleteStep", req.WorkflowID, req.SessionID)
	if err != nil {
		return err
	}
	owner := req.SessionID
	if w != nil {
		if old := w.Step(req.StepID); old != nil && old.Identity != req.Identity {
			return session.Errorf(session.CodeStepIdentityChanged,
				"workflow %q: step %q was recorded with identity %q, not %q", req.WorkflowID, req.StepID, old.Identity, req.Identity)
		}
		owner = w.SessionID
	}
	key := session.LeaseKeyWorkflow(req.WorkflowID)
	f, err := e.leases.fence(ctx, key)
	if err != nil {
		return wrapStore("CompleteStep", err)
	}
	if f != nil {
		// The lease is checked in the step's own transaction.
		err = e.leases.leaser.SaveStepFenced(ctx, req.WorkflowID, owner, rec, *f)
	} else {
		err = e.store.SaveStep(ctx, req.WorkflowID, owner, rec)
	}
	if err != nil {
		e.leases.forget(key, err)
		return wrapStore("CompleteStep", err)
	}
	e.publishOut(ctx, api.NewEvent(api.EventWorkflowStepCompleted, api.WorkflowStepCompletedData{
		WorkflowID: req.WorkflowID, StepID: req.StepID,
	}))
	return nil
}

// FinishWorkflow deletes the workflow's checkpoint: the workflow is done
// (or abandoned) and a later BeginWorkflow starts from nothing. not_found
// when there is no checkpoint.
func (e *Engine) FinishWorkflow(ctx context.Context, workflowID string) error {
	if err := e.check(); err != nil {
		return err
	}
	if err := session.ValidateID("workflow", workflowID); err != nil {
		return err
	}
	unlock := e.workflows.lock(workflowID)
	defer unlock()
	if err := e.store.DeleteWorkflow(ctx, workflowID); err != nil {
		return wrapStore("FinishWorkflow", err)
	}
	e.leases.release(ctx, session.LeaseKeyWorkflow(workflowID))
	return nil
}

// loadWorkflow returns the workflow checkpoint, nil when there is none, and
// checks the owner: a named session must exist, and must own an existing
// workflow that has an owner.
func (e *Engine) loadWorkflow(ctx context.Context, op, workflowID, sessionID string) (*session.Workflow, error) {
	if sessionID != "" {
		if err := session.ValidateID("session", sessionID); err != nil {
			return nil, err
		}
		if _, err := e.store.Stat(ctx, sessionID); err != nil {
			return nil, wrapStore(op, err)
		}
	}
	w, err := e.store.Workflow(ctx, workflowID)
	switch {
	case isCode(err, session.CodeNotFound):
		return nil, nil
	case err != nil:
		return nil, wrapStore(op, err)
	}
	if sessionID != "" && w.SessionID != "" && w.SessionID != sessionID {
		return nil, session.Errorf(session.CodeNotOwner, "workflow %q belongs to session %q, not %q", workflowID, w.SessionID, sessionID)
	}
	return w, nil
}
