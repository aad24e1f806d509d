package protocol

import (
	"context"

	"github.com/cairn-dev/cairn/engine"
	"github.com/cairn-dev/cairn/session"
	"github.com/cairn-dev/cairn/workspace"
)

// The methods below mirror the engine's (engine/api.go) one for one, so
// code can switch between the embedded engine and a daemon. Errors are as
// for Call.

// Status returns the daemon's status.
func (c *Client) Status(ctx context.Context) (StatusResult, error) {
	var r StatusResult
	err := c.Call(ctx, MethodStatus, Empty{}, &r)
	return r, err
}

// Save saves a snapshot or a change.
func (c *Client) Save(ctx context.Context, req engine.SaveRequest) (engine.SaveResult, error) {
	var r engine.SaveResult
	err := c.Call(ctx, MethodSave, req, &r)
	return r, err
}

// ResumeSession returns what a new agent is handed for a session.
func (c *Client) ResumeSession(ctx context.Context, sessionID string) (*engine.ResumeSessionResult, error) {
	var r engine.ResumeSessionResult
	if err := c.Call(ctx, MethodResumeSession, SessionParams{SessionID: sessionID}, &r); err != nil {
		return nil, err
	}
	return &r, nil
}

// BeginRun starts a run.
func (c *Client) BeginRun(ctx context.Context, req engine.BeginRunRequest) (engine.BeginRunResult, error) {
	var r engine.BeginRunResult
	err := c.Call(ctx, MethodBeginRun, req, &r)
	return r, err
}

// Checkpoint records a loop checkpoint.
func (c *Client) Checkpoint(ctx context.Context, req engine.CheckpointRequest) (engine.CheckpointResult, error) {
	var r engine.CheckpointResult
	err := c.Call(ctx, MethodCheckpoint, req, &r)
	return r, err
}

// CompleteRun ends a run.
func (c *Client) CompleteRun(ctx context.Context, req engine.CompleteRunRequest) (engine.CompleteRunResult, error) {
	var r engine.CompleteRunResult
	err := c.Call(ctx, MethodCompleteRun, req, &r)
	return r, err
}

// ResumeRun resumes a run from its latest loop checkpoint.
func (c *Client) ResumeRun(ctx context.Context, req engine.ResumeRunRequest) (*engine.ResumeRunResult, error) {
	var r engine.ResumeRunResult
	if err := c.Call(ctx, MethodResumeRun, req, &r); err != nil {
		return nil, err
	}
	return &r, nil
}

// BeginWorkflow opens or reopens a workflow.
func (c *Client) BeginWorkflow(ctx context.Context, req engine.BeginWorkflowRequest) (engine.BeginWorkflowResult, error) {
	var r engine.BeginWorkflowResult
	err := c.Call(ctx, MethodBeginWorkflow, req, &r)
	return r, err
}

// CompleteStep records a completed workflow step.
func (c *Client) CompleteStep(ctx context.Context, req engine.CompleteStepRequest) error {
	return c.Call(ctx, MethodCompleteStep, req, nil)
}

// FinishWorkflow deletes a workflow's checkpoint.
func (c *Client) FinishWorkflow(ctx context.Context, workflowID string) error {
	return c.Call(ctx, MethodFinishWorkflow, WorkflowParams{WorkflowID: workflowID}, nil)
}

// List describes every session.
func (c *Client) List(ctx context.Context) ([]session.Summary, error) {
	var r ListResult
	err := c.Call(ctx, MethodList, Empty{}, &r)
	return r.Sessions, err
}

// Delete removes a session and everything that belongs to it.
func (c *Client) Delete(ctx context.Context, sessionID string) error {
	return c.Call(ctx, MethodDelete, SessionParams{SessionID: sessionID}, nil)
}

// Fork copies a session to a new id.
func (c *Client) Fork(ctx context.Context, req engine.ForkRequest) (engine.ForkResult, error) {
	var r engine.ForkResult
	err := c.Call(ctx, MethodFork, req, &r)
	return r, err
}

// Export returns a session's JSON envelope.
func (c *Client) Export(ctx context.Context, sessionID string) ([]byte, error) {
	var r ExportResult
	err := c.Call(ctx, MethodExport, SessionParams{SessionID: sessionID}, &r)
	return r.Envelope, err
}

// Import stores a session from a JSON envelope.
// Changes returns the workspace files changed since the clock since (""
// or a foreign clock: everything, with fresh_instance set).
func (c *Client) Changes(ctx context.Context, since string) (workspace.ChangeSet, error) {
	var r workspace.ChangeSet
	err := c.Call(ctx, MethodChanges, ChangesParams{Since: since}, &r)
	return r, err
}

// Handoff returns the session's HANDOFF.md and what it lacks.
func (c *Client) Handoff(ctx context.Context, sessionID string) (engine.HandoffResult, error) {
	var r engine.HandoffResult
	err := c.Call(ctx, MethodHandoff, engine.HandoffRequest{SessionID: sessionID}, &r)
	return r, err
}

// RuntimeCheck returns the live state of the session's recorded processes.
func (c *Client) RuntimeCheck(ctx context.Context, req engine.RuntimeCheckRequest) (engine.RuntimeCheckResult, error) {
	var r engine.RuntimeCheckResult
	err := c.Call(ctx, MethodRuntimeCheck, req, &r)
	return r, err
}

func (c *Client) Import(ctx context.Context, envelope []byte) (engine.ImportResult, error) {
	var r engine.ImportResult
	err := c.Call(ctx, MethodImport, ImportParams{Envelope: envelope}, &r)
	return r, err
}
