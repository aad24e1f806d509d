package session

// Change is what one commit adds to a session: either a whole snapshot
// (Replace) or a delta. A delta appends messages, traces and artifacts;
// upserts runs, verifications and subagent tasks by id; replaces the
// workspace, agent, handoff, runtime and files records when they are set; and
// merges metadata key by key, where a JSON null value removes the key.
//
// A delta can also edit what is there, at the cost of what it writes:
// TruncateMessages keeps the first N messages (applied before
// AppendMessages, so truncating to i and appending replaces the messages from
// index i on, the compaction case); DeleteArtifacts removes artifacts by id
// (before AppendArtifacts) and PutArtifacts inserts or replaces them (after
// it). AppendArtifacts only adds: an id the session already
// holds is refused with conflict (use PutArtifacts to replace).
//
// A Change may also record a loop checkpoint (written in the same atomic
// commit as the messages it follows) and drop the checkpoints of runs.
type Change struct {
	SchemaVersion int `json:"schema_version,omitempty"`

	Replace *Snapshot `json:"replace,omitempty"`

	Workspace           *Workspace       `json:"workspace,omitempty"`
	Agent               map[string]Value `json:"agent,omitempty"`
	Metadata            map[string]Value `json:"metadata,omitempty"`
	AppendMessages      []Value          `json:"append_messages,omitempty"`
	AppendTraces        []Trace          `json:"append_traces,omitempty"`
	AppendArtifacts     []Artifact       `json:"append_artifacts,omitempty"`
	TruncateMessages    *int64           `json:"truncate_messages,omitempty"`
	DeleteArtifacts     []string         `json:"delete_artifacts,omitempty"`
	PutArtifacts        []Artifact       `json:"put_artifacts,omitempty"`
	UpsertRuns          []Run            `json:"upsert_runs,omitempty"`
	UpsertVerifications []Verification   `json:"upsert_verifications,omitempty"`
	UpsertSubagentTasks []SubagentTask   `json:"upsert_subagent_tasks,omitempty"`
	Handoff             *Handoff         `json:"handoff,omitempty"`
	Runtime             *Runtime         `json:"runtime,omitempty"`
	Files               *ManifestRef     `json:"files,omitempty"`

	Checkpoint      *LoopCheckpoint `json:"checkpoint,omitempty"`
	DropCheckpoints []string        `json:"drop_checkpoints,omitempty"`

	// RestoreCheckpoints, only with Replace, sets loop checkpoints as
	// they were recorded elsewhere, message counts included: import uses
	// it to carry an exported session's runs on. It is not on the wire.
	RestoreCheckpoints []LoopCheckpoint `json:"-"`
}

// HasDelta reports whether c carries any delta field besides checkpoints.
func (c *Change) HasDelta() bool {
	return c.Workspace != nil || c.Agent != nil || c.Metadata != nil ||
		len(c.AppendMessages) > 0 || len(c.AppendTraces) > 0 || len(c.AppendArtifacts) > 0 ||
		c.TruncateMessages != nil || len(c.DeleteArtifacts) > 0 || len(c.PutArtifacts) > 0 ||
		len(c.UpsertRuns) > 0 || len(c.UpsertVerifications) > 0 || len(c.UpsertSubagentTasks) > 0 ||
		c.Handoff != nil || c.Runtime != nil || c.Files != nil
}

// CommitOptions qualify a commit.
type CommitOptions struct {
	// ExpectGeneration, when non-nil, makes the commit a compare-and-swap:
	// it fails with ErrConflict and changes nothing unless the session's
	// current generation equals *ExpectGeneration (0: the session must not
	// exist yet).
	ExpectGeneration *uint64
	// MustNotExist makes the commit fail with ErrConflict when the session
	// already exists (used by fork and import).
	MustNotExist bool
	// Normalized says the caller has passed c through Normalize and not
	// changed it since, beyond adding records it vouches for (the engine
	// stamps the workspace manifest): the store does not normalise it
	// again, which on a whole snapshot would scan every value twice.
	Normalized bool
	// Fence, when non-nil, makes the commit conditional on a lease (see
	// Leaser): a store that implements Leaser checks, in the commit's own
	// transaction, that Fence.Holder still holds Fence.Key with
	// Fence.Token, renews it, and otherwise fails with ErrNotOwner and
	// writes nothing. Stores without leases ignore it.
	Fence *Fence
	// Notify, when non-nil, is called by a store that implements Notifier
	// inside the commit's transaction with the generation it commits; the
	// payload it returns (none when empty) reaches every listener once the
	// commit is durable, in commit order. Other stores ignore it.
	Notify func(generation uint64) string
}

// Expect returns a pointer to g, for CommitOptions.ExpectGeneration.
func Expect(g uint64) *uint64 { return &g }

// CommitResult reports what a commit did.
type CommitResult struct {
	Generation   uint64 `json:"generation"`
	MessageCount int64  `json:"message_count"`
	// BytesWritten is how many bytes the commit wrote to durable storage
	// (0 for a memory store), compaction excluded.
	BytesWritten int64 `json:"bytes_written"`
}
