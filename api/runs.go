package api

import "github.com/cairn-dev/cairn/session"

// BeginRunRequest starts a run in a session. RunID is optional; the engine
// assigns a unique one when it is empty.
type BeginRunRequest struct {
	SessionID string `json:"session_id"`
	RunID     string `json:"run_id,omitempty"`
}

// BeginRunResult names the started run.
type BeginRunResult struct {
	RunID      string `json:"run_id"`
	Generation uint64 `json:"generation"`
}

// CheckpointRequest records the boundary after a completed tool turn. Usage
// and ToolCallsCount are the run's totals so far, not the turn's increments.
//
// SessionID is optional: when set it must be the session that records the
// run (else not_owner). It is only needed to pick the right session when a
// fork or an import copied the run id into another session and the run has
// not checkpointed yet.
type CheckpointRequest struct {
	RunID          string          `json:"run_id"`
	SessionID      string          `json:"session_id,omitempty"`
	Turn           int64           `json:"turn"`
	NewMessages    []session.Value `json:"new_messages"`
	Usage          session.Usage   `json:"usage"`
	ToolCallsCount int64           `json:"tool_calls_count"`
	State          session.Value   `json:"state,omitempty"`
}

// CheckpointResult reports the commit a checkpoint made.
type CheckpointResult struct {
	Generation   uint64 `json:"generation"`
	MessageCount int64  `json:"message_count"`
}

// CompleteRunRequest ends a run with status completed, failed or
// interrupted. Usage and ToolCallsCount, when set, are the run's final
// totals. SessionID is optional, as in CheckpointRequest.
type CompleteRunRequest struct {
	RunID          string         `json:"run_id"`
	SessionID      string         `json:"session_id,omitempty"`
	Status         string         `json:"status"`
	Usage          *session.Usage `json:"usage,omitempty"`
	ToolCallsCount *int64         `json:"tool_calls_count,omitempty"`
}

// CompleteRunResult reports the commit that ended the run.
type CompleteRunResult struct {
	Generation uint64 `json:"generation"`
}

// ResumeRunRequest resumes a run from its latest loop checkpoint. SessionID,
// when set, must own the run (else not_owner). NewRunID is optional.
type ResumeRunRequest struct {
	RunID     string `json:"run_id"`
	SessionID string `json:"session_id,omitempty"`
	NewRunID  string `json:"new_run_id,omitempty"`
	// Takeover, on a store that hosts share, takes the run's lease from
	// the host that holds it even before the lease expires: the caller
	// says that host is gone. Without it a run whose lease is live on
	// another host is conflict.
	Takeover bool `json:"takeover,omitempty"`
}

// ResumeRunResult is what the host needs to continue a run's loop: the new
// run's id, the messages up to the checkpoint's boundary, and the turn,
// usage and tool-call count carried on from it.
type ResumeRunResult struct {
	RunID                       string          `json:"run_id"`
	ResumedFrom                 string          `json:"resumed_from"`
	SessionID                   string          `json:"session_id"`
	Messages                    []session.Value `json:"messages"`
	Turn                        int64           `json:"turn"`
	Usage                       session.Usage   `json:"usage"`
	ToolCallsCount              int64           `json:"tool_calls_count"`
	State                       session.Value   `json:"state,omitempty"`
	FilesTouchedAfterCheckpoint []string        `json:"files_touched_after_checkpoint"`
	FilesTracked                bool            `json:"files_tracked"`
}

// StepSpec names one workflow step and the digest of its spec.
type StepSpec struct {
	StepID   string `json:"step_id"`
	Identity string `json:"identity"`
}

// BeginWorkflowRequest opens (or reopens) a resumable workflow.
type BeginWorkflowRequest struct {
	WorkflowID string     `json:"workflow_id"`
	SessionID  string     `json:"session_id,omitempty"`
	Steps      []StepSpec `json:"steps"`
	// Takeover, on a store that hosts share, takes the workflow's lease
	// from the host that holds it even before the lease expires.
	Takeover bool `json:"takeover,omitempty"`
}

// BeginWorkflowResult lists the steps already completed, in spec order.
type BeginWorkflowResult struct {
	Completed []session.StepRecord `json:"completed"`
}

// CompleteStepRequest records one successful step.
type CompleteStepRequest struct {
	WorkflowID string        `json:"workflow_id"`
	SessionID  string        `json:"session_id,omitempty"`
	StepID     string        `json:"step_id"`
	Identity   string        `json:"identity"`
	Result     session.Value `json:"result,omitempty"`
}

// WorkflowParams name a workflow (finishWorkflow).
type WorkflowParams struct {
	WorkflowID string `json:"workflow_id"`
}
