package session

import "context"

// Capabilities reports what a Store guarantees, so the engine and clients can
// tell a durable store from a test double.
type Capabilities struct {
	// AtomicGenerations: a reader sees generation N or N+1, never a mix.
	AtomicGenerations bool `json:"atomic_generations"`
	// DeltaCommits: a delta commit costs work in proportion to the delta.
	DeltaCommits bool `json:"delta_commits"`
	// CompareAndSwap: CommitOptions.ExpectGeneration is honoured atomically.
	CompareAndSwap bool `json:"compare_and_swap"`
	// CrossProcessLock: one writer process at a time, enforced.
	CrossProcessLock bool `json:"cross_process_lock"`
	// Durable: an acknowledged commit survives a crash and power loss.
	Durable bool `json:"durable"`
	// History: earlier generations can be loaded (until compacted).
	History bool `json:"history"`
}

// Store keeps sessions, their loop checkpoints and workflow checkpoints.
//
// Every method is safe for concurrent use. Commit validates (Normalize)
// before it writes anything; when it returns nil the commit is applied (and,
// for a durable store, durable), and when it returns an error nothing of it is
// visible.
type Store interface {
	Reader

	// Capabilities reports what this store guarantees.
	Capabilities() Capabilities

	// Commit applies c to the session as its next generation, creating the
	// session when it does not exist. It checks c against the session with
	// CheckEdits first.
	Commit(ctx context.Context, sessionID string, c *Change, opts CommitOptions) (CommitResult, error)

	// Load returns the session at generation at (0: the latest), with the
	// loop checkpoints as of that generation. ErrNotFound when the session
	// or that generation does not exist (any more). It costs the whole
	// session: the engine uses the Reader methods instead, and Load only
	// for an earlier generation.
	Load(ctx context.Context, sessionID string, at uint64) (*State, error)

	// Stat describes the session without loading its content.
	Stat(ctx context.Context, sessionID string) (Summary, error)

	// List describes every session, ordered by session id.
	List(ctx context.Context) ([]Summary, error)

	// Delete removes the session, its loop checkpoints and the workflows it
	// owns. ErrNotFound when there is no such session.
	Delete(ctx context.Context, sessionID string) error

	// FindRun returns the id of the session that records runID, or
	// ErrNotFound.
	FindRun(ctx context.Context, runID string) (string, error)

	// Checkpoint returns the latest loop checkpoint of runID, or
	// ErrNoCheckpoint.
	Checkpoint(ctx context.Context, runID string) (*LoopCheckpoint, error)

	// Workflow returns the checkpoint of workflowID, or ErrNotFound.
	Workflow(ctx context.Context, workflowID string) (*Workflow, error)

	// Workflows returns the checkpoints of the workflows sessionID owns,
	// ordered by workflow id (none: an empty list, whether or not the
	// session exists). Export carries them.
	Workflows(ctx context.Context, sessionID string) ([]*Workflow, error)

	// SaveStep durably records a completed step, creating the workflow
	// checkpoint (owned by sessionID, which may be empty) when needed. A
	// step recorded again replaces the earlier record.
	SaveStep(ctx context.Context, workflowID, sessionID string, step StepRecord) error

	// DeleteWorkflow removes the workflow checkpoint. ErrNotFound when
	// there is none.
	DeleteWorkflow(ctx context.Context, workflowID string) error

	// Close releases the store. Later calls fail.
	Close() error
}
