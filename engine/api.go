package engine

// This file is the engine's public contract: request and result types and
// the method set the daemon and the C API dispatch to. JSON tags are the
// field names on every wire (CBOR protocol and the C API's JSON).

import (
	"context"
	"time"

	"github.com/cairn-dev/cairn/procs"
	"github.com/cairn-dev/cairn/session"
)

// SaveRequest saves a whole snapshot or a delta. Exactly one of Snapshot and
// Change is set.
type SaveRequest struct {
	SessionID        string            `json:"session_id"`
	Snapshot         *session.Snapshot `json:"snapshot,omitempty"`
	Change           *session.Change   `json:"change,omitempty"`
	ExpectGeneration *uint64           `json:"expect_generation,omitempty"`
}

// SaveResult reports the generation a save created.
type SaveResult struct {
	Generation uint64 `json:"generation"`
}

// Drift lists workspace files changed since a generation was saved. It is
// filled by workspace tracking; until then ResumeSession reports it as
// unknown (Tracked false) rather than as "no changes".
type Drift struct {
	Tracked bool `json:"tracked"`
	// Reason says why drift is not tracked, when it is not.
	Reason   string   `json:"reason,omitempty"`
	Added    []string `json:"added"`
	Modified []string `json:"modified"`
	Deleted  []string `json:"deleted"`
}

// InterruptedRun is a run left running with a loop checkpoint.
//
// Status and ResumedAs are additions to the first draft of this contract:
// Status is "running" for a run left running, or "interrupted" for a run
// already resumed whose successor (ResumedAs) has not checkpointed yet, so
// its checkpoint is still the latest boundary of that line of work.
type InterruptedRun struct {
	RunID          string        `json:"run_id"`
	Status         string        `json:"status"`
	ResumedAs      string        `json:"resumed_as,omitempty"`
	Turn           int64         `json:"turn"`
	MessageCount   int64         `json:"message_count"`
	Usage          session.Usage `json:"usage"`
	ToolCallsCount int64         `json:"tool_calls_count"`
	CheckpointedAt time.Time     `json:"checkpointed_at"`
}

// ResumeSessionResult is what a new agent is handed for a session.
type ResumeSessionResult struct {
	Snapshot        *session.Snapshot `json:"snapshot"`
	Generation      uint64            `json:"generation"`
	Drift           Drift             `json:"drift"`
	InterruptedRuns []InterruptedRun  `json:"interrupted_runs"`
	// Processes is the live state of each recorded runtime process, from
	// its health check run now (bounded by Options.ProbeTimeout):
	// not_running, healthy, unhealthy or unknown. Nothing is restarted.
	Processes []procs.ProcessState `json:"processes"`
}

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
// SessionID (an addition) is optional: when set it must be the session that
// records the run (else not_owner). It is only needed to pick the right
// session when a fork or an import copied the run id into another session
// and the run has not checkpointed yet.
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
// interrupted. Usage and ToolCallsCount, when set, are the run's final totals.
// SessionID (an addition) is optional, as in CheckpointRequest.
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
}

// ResumeRunResult is what the host needs to continue a run's loop.
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

// ForkRequest copies a session (at a generation, 0: latest) to a new id.
type ForkRequest struct {
	SessionID    string `json:"session_id"`
	NewID        string `json:"new_id"`
	AtGeneration uint64 `json:"at_generation,omitempty"`
}

// ForkResult reports the new session's generation.
type ForkResult struct {
	SessionID  string `json:"session_id"`
	Generation uint64 `json:"generation"`
}

// ImportResult reports the imported session.
type ImportResult struct {
	SessionID  string `json:"session_id"`
	Generation uint64 `json:"generation"`
}

// Event types published to subscribers. Every commit publishes
// session.committed {session_id, generation}; a checkpoint, a run's end and
// a resume then also publish their own event from the same commit.
// session.deleted and run.resumed are additions to the first draft.
const (
	EventSessionCommitted      = "session.committed"       // {session_id, generation}
	EventSessionDeleted        = "session.deleted"         // {session_id}
	EventRunCheckpointed       = "run.checkpointed"        // {session_id, run_id, turn, generation}
	EventRunCompleted          = "run.completed"           // {session_id, run_id, status, generation}
	EventRunResumed            = "run.resumed"             // {session_id, run_id (new), resumed_from, generation}
	EventWorkflowStepCompleted = "workflow.step_completed" // {workflow_id, step_id}
)

// Event is something that happened, published after it is durable.
type Event struct {
	Type string         `json:"event"`
	Data map[string]any `json:"data"`
}

// Workspace is the workspace tracker the engine consults when it has one
// (Options.Workspace): it records a manifest with every commit, names the
// files changed since a generation on ResumeSession, and the files touched
// after a run's last checkpoint on ResumeRun. *workspace.Tracker
// implements it.
type Workspace interface {
	// RecordManifest records the workspace's manifest now and returns its
	// reference.
	RecordManifest(ctx context.Context) (session.ManifestRef, error)
	// DiffFiles lists the files added, modified and deleted between the
	// manifest from and the manifest to (nil: the workspace now).
	DiffFiles(ctx context.Context, from session.ManifestRef, to *session.ManifestRef) (added, modified, deleted []string, err error)
}

// The Engine's method set (implemented in engine.go), which the daemon and
// the C API dispatch to:
//
//	New(store session.Store, opts Options) *Engine
//	Save(ctx, SaveRequest) (SaveResult, error)
//	ResumeSession(ctx, sessionID string) (*ResumeSessionResult, error)
//	BeginRun(ctx, BeginRunRequest) (BeginRunResult, error)
//	Checkpoint(ctx, CheckpointRequest) (CheckpointResult, error)
//	CompleteRun(ctx, CompleteRunRequest) (CompleteRunResult, error)
//	ResumeRun(ctx, ResumeRunRequest) (*ResumeRunResult, error)
//	BeginWorkflow(ctx, BeginWorkflowRequest) (BeginWorkflowResult, error)
//	CompleteStep(ctx, CompleteStepRequest) error
//	FinishWorkflow(ctx, workflowID string) error
//	List(ctx) ([]session.Summary, error)
//	Delete(ctx, sessionID string) error
//	Fork(ctx, ForkRequest) (ForkResult, error)
//	Export(ctx, sessionID string) ([]byte, error)   // one JSON envelope (see Envelope)
//	Import(ctx, envelope []byte) (ImportResult, error)
//	Subscribe(fn func(Event)) (cancel func())
//	Handoff(ctx, HandoffRequest) (HandoffResult, error)
//	RuntimeCheck(ctx, RuntimeCheckRequest) (RuntimeCheckResult, error)
//	RuntimeRestart(ctx, RuntimeRestartRequest) (procs.Result, error)
//	Capabilities() session.Capabilities
//	Close() error                                    // closes the store
