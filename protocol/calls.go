package protocol

import (
	"context"

	"github.com/cairn-dev/cairn/api"
	"github.com/cairn-dev/cairn/session"
)

// Do calls method m with params p and returns its result, typed by m's
// entry in the method table (api.Methods). Errors are as for Call.
func Do[P, R any](ctx context.Context, c *Client, m api.Spec[P, R], p P) (R, error) {
	var r R
	err := c.Call(ctx, m.Name, p, &r)
	return r, err
}

// The methods below are Do for each method, with the engine's argument
// shapes, so code can switch between the embedded engine and a daemon.

// Status returns the daemon's status.
func (c *Client) Status(ctx context.Context) (api.StatusResult, error) {
	return Do(ctx, c, api.Status, api.Empty{})
}

// Save saves a snapshot or a change.
func (c *Client) Save(ctx context.Context, req api.SaveRequest) (api.SaveResult, error) {
	return Do(ctx, c, api.Save, req)
}

// ResumeSession returns what a new agent is handed for a session.
func (c *Client) ResumeSession(ctx context.Context, sessionID string) (*api.ResumeSessionResult, error) {
	return c.ResumeSessionWith(ctx, api.ResumeSessionRequest{SessionID: sessionID})
}

// ResumeSessionWith returns what a new agent is handed for a session,
// trimmed by the request's options (a message tail, artifacts as metadata
// or none, no traces, no drift, no process checks).
func (c *Client) ResumeSessionWith(ctx context.Context, req api.ResumeSessionRequest) (*api.ResumeSessionResult, error) {
	r, err := Do(ctx, c, api.ResumeSession, req)
	if err != nil {
		return nil, err
	}
	return &r, nil
}

// Summary describes a session without its content.
func (c *Client) Summary(ctx context.Context, sessionID string) (session.Summary, error) {
	return Do(ctx, c, api.Summary, api.SessionParams{SessionID: sessionID})
}

// Messages returns a page of a session's messages.
func (c *Client) Messages(ctx context.Context, req api.MessagesRequest) (api.MessagesResult, error) {
	return Do(ctx, c, api.Messages, req)
}

// ArtifactsByID returns, with their data, the named artifacts a session
// holds, in the order named, skipping ids it does not hold.
func (c *Client) ArtifactsByID(ctx context.Context, req api.ArtifactsByIDRequest) (api.ArtifactsByIDResult, error) {
	return Do(ctx, c, api.ArtifactsByID, req)
}

// Artifact returns one artifact of a session with its data.
func (c *Client) Artifact(ctx context.Context, req api.ArtifactRequest) (api.ArtifactResult, error) {
	return Do(ctx, c, api.Artifact, req)
}

// Artifacts lists a session's artifacts without their data.
func (c *Client) Artifacts(ctx context.Context, sessionID string) (api.ArtifactsResult, error) {
	return Do(ctx, c, api.Artifacts, api.SessionParams{SessionID: sessionID})
}

// Run returns one run with its latest loop checkpoint.
func (c *Client) Run(ctx context.Context, req api.RunRequest) (api.RunResult, error) {
	return Do(ctx, c, api.Run, req)
}

// Runs lists a session's runs.
func (c *Client) Runs(ctx context.Context, sessionID string) (api.RunsResult, error) {
	return Do(ctx, c, api.Runs, api.SessionParams{SessionID: sessionID})
}

// RunEvents returns a page of a run's traces and kept loop checkpoints.
func (c *Client) RunEvents(ctx context.Context, req api.RunEventsRequest) (api.RunEventsResult, error) {
	return Do(ctx, c, api.RunEvents, req)
}

// BeginRun starts a run.
func (c *Client) BeginRun(ctx context.Context, req api.BeginRunRequest) (api.BeginRunResult, error) {
	return Do(ctx, c, api.BeginRun, req)
}

// Checkpoint records a loop checkpoint.
func (c *Client) Checkpoint(ctx context.Context, req api.CheckpointRequest) (api.CheckpointResult, error) {
	return Do(ctx, c, api.Checkpoint, req)
}

// CompleteRun ends a run.
func (c *Client) CompleteRun(ctx context.Context, req api.CompleteRunRequest) (api.CompleteRunResult, error) {
	return Do(ctx, c, api.CompleteRun, req)
}

// ResumeRun resumes a run from its latest loop checkpoint.
func (c *Client) ResumeRun(ctx context.Context, req api.ResumeRunRequest) (*api.ResumeRunResult, error) {
	r, err := Do(ctx, c, api.ResumeRun, req)
	if err != nil {
		return nil, err
	}
	return &r, nil
}

// BeginWorkflow opens or reopens a workflow.
func (c *Client) BeginWorkflow(ctx context.Context, req api.BeginWorkflowRequest) (api.BeginWorkflowResult, error) {
	return Do(ctx, c, api.BeginWorkflow, req)
}

// CompleteStep records a completed workflow step.
func (c *Client) CompleteStep(ctx context.Context, req api.CompleteStepRequest) error {
	_, err := Do(ctx, c, api.CompleteStep, req)
	return err
}

// FinishWorkflow deletes a workflow's checkpoint.
func (c *Client) FinishWorkflow(ctx context.Context, workflowID string) error {
	_, err := Do(ctx, c, api.FinishWorkflow, api.WorkflowParams{WorkflowID: workflowID})
	return err
}

// List describes every session.
func (c *Client) List(ctx context.Context) ([]session.Summary, error) {
	r, err := Do(ctx, c, api.List, api.Empty{})
	return r.Sessions, err
}

// Delete removes a session and everything that belongs to it.
func (c *Client) Delete(ctx context.Context, sessionID string) error {
	_, err := Do(ctx, c, api.Delete, api.SessionParams{SessionID: sessionID})
	return err
}

// Fork copies a session to a new id.
func (c *Client) Fork(ctx context.Context, req api.ForkRequest) (api.ForkResult, error) {
	return Do(ctx, c, api.Fork, req)
}

// Export returns a session's JSON envelope (api.Envelope).
func (c *Client) Export(ctx context.Context, sessionID string) ([]byte, error) {
	r, err := Do(ctx, c, api.Export, api.SessionParams{SessionID: sessionID})
	return r.Envelope, err
}

// Import stores a session from a JSON envelope.
func (c *Client) Import(ctx context.Context, envelope []byte) (api.ImportResult, error) {
	return Do(ctx, c, api.Import, api.ImportParams{Envelope: envelope})
}

// ExportFile has the daemon write a session's envelope to the file at path
// (absolute, on the daemon's machine) as it reads the session.
func (c *Client) ExportFile(ctx context.Context, sessionID, path string) (api.ExportFileResult, error) {
	return Do(ctx, c, api.ExportFile, api.ExportFileRequest{SessionID: sessionID, Path: path})
}

// Verify has the daemon check every byte its store keeps (and, with
// req.Secrets, scan session content for credential-shaped strings).
func (c *Client) Verify(ctx context.Context, req session.VerifyRequest) (session.VerifyReport, error) {
	return Do(ctx, c, api.Verify, req)
}

// Repair has the daemon salvage a damaged session or workflow log (or,
// without req.Apply, say what it would keep).
func (c *Client) Repair(ctx context.Context, req session.RepairRequest) (session.RepairReport, error) {
	return Do(ctx, c, api.Repair, req)
}

// ImportFile has the daemon import the envelope in the file at path
// (absolute, on the daemon's machine).
func (c *Client) ImportFile(ctx context.Context, path string) (api.ImportResult, error) {
	return Do(ctx, c, api.ImportFile, api.ImportFileRequest{Path: path})
}

// Changes returns the workspace files changed since the clock since (""
// or a foreign clock: everything, with fresh_instance set).
func (c *Client) Changes(ctx context.Context, since string) (api.ChangeSet, error) {
	return Do(ctx, c, api.Changes, api.ChangesParams{Since: since})
}

// Handoff returns the session's HANDOFF.md and what it lacks.
func (c *Client) Handoff(ctx context.Context, sessionID string) (api.HandoffResult, error) {
	return Do(ctx, c, api.Handoff, api.HandoffRequest{SessionID: sessionID})
}

// RuntimeCheck returns the live state of the session's recorded processes.
func (c *Client) RuntimeCheck(ctx context.Context, req api.RuntimeCheckRequest) (api.RuntimeCheckResult, error) {
	return Do(ctx, c, api.RuntimeCheck, req)
}

// RuntimeRestart brings one recorded process back, unless its health
// check passes now.
func (c *Client) RuntimeRestart(ctx context.Context, req api.RuntimeRestartRequest) (api.RestartResult, error) {
	return Do(ctx, c, api.RuntimeRestart, req)
}
