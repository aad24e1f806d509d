package api

import (
	"encoding/json"
	"time"

	"github.com/cairn-dev/cairn/session"
)

// Empty is the params or result of a method that has none: an empty map.
type Empty struct{}

// SessionParams name a session (resumeSession, delete, export).
type SessionParams struct {
	SessionID string `json:"session_id"`
}

// SaveRequest saves a whole snapshot or a delta. Exactly one of Snapshot and
// Change is set. With ExpectGeneration the save fails with conflict, and
// changes nothing, unless the session is at that generation.
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

// Drift lists workspace files changed since a generation was saved. When
// the workspace is not tracked, Tracked is false and Reason says why: that
// is "unknown", never "no changes".
type Drift struct {
	Tracked bool `json:"tracked"`
	// Reason says why drift is not tracked, when it is not; when it is,
	// a Reason says the lists may hold more than changes since the save
	// (the generation's manifest was inexact: files.inexact).
	Reason   string   `json:"reason,omitempty"`
	Added    []string `json:"added"`
	Modified []string `json:"modified"`
	Deleted  []string `json:"deleted"`
}

// InterruptedRun is a run left running with a loop checkpoint. Status is
// "running" for a run left running, or "interrupted" for a run already
// resumed whose successor (ResumedAs) has not checkpointed yet, so its
// checkpoint is still the latest boundary of that line of work.
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

// ResumeSessionRequest resumes a session. Without options the answer holds
// the whole session. MessagesTail returns only the last N messages
// (MessagesFrom in the result says where they start); Artifacts is "full"
// (the default), "metadata" (no data) or "none"; Traces is "all" (the
// default) or "none"; Drift and Processes false skip the workspace drift
// and the process health checks (reported as not tracked and empty).
type ResumeSessionRequest struct {
	SessionID    string `json:"session_id"`
	MessagesTail *int64 `json:"messages_tail,omitempty"`
	Artifacts    string `json:"artifacts,omitempty"`
	Traces       string `json:"traces,omitempty"`
	Drift        *bool  `json:"drift,omitempty"`
	Processes    *bool  `json:"processes,omitempty"`
}

// Resume options' values.
const (
	IncludeFull     = "full"
	IncludeMetadata = "metadata"
	IncludeNone     = "none"
	IncludeAll      = "all"
)

// ResumeSessionResult is what a new agent is handed for a session.
type ResumeSessionResult struct {
	Snapshot   *session.Snapshot `json:"snapshot"`
	Generation uint64            `json:"generation"`
	// MessageCount is the session's message count; MessagesFrom the index
	// of Snapshot.Messages[0] (0 unless a tail was asked for).
	MessageCount    int64            `json:"message_count"`
	MessagesFrom    int64            `json:"messages_from"`
	Drift           Drift            `json:"drift"`
	InterruptedRuns []InterruptedRun `json:"interrupted_runs"`
	// Processes is the live state of each recorded runtime process, from
	// its health check run now (bounded by the engine's probe timeout):
	// not_running, healthy, unhealthy or unknown. Nothing is restarted.
	Processes []ProcessState `json:"processes"`
}

// ListResult is the result of list.
type ListResult struct {
	Sessions []session.Summary `json:"sessions"`
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

// ExportResult is the result of export: the envelope's JSON text (Envelope
// describes it). On the CBOR wire it is a byte string; through the C API
// it is the JSON value itself.
type ExportResult struct {
	Envelope json.RawMessage `json:"envelope" schema:"Envelope"`
}

// ImportParams are the params of import: an envelope's JSON text, carried
// as ExportResult carries it.
type ImportParams struct {
	Envelope json.RawMessage `json:"envelope" schema:"Envelope"`
}

// ImportResult reports the imported session.
type ImportResult struct {
	SessionID  string `json:"session_id"`
	Generation uint64 `json:"generation"`
}

// Envelope is the single-file JSON form of a session that export writes
// and import reads. Session holds the snapshot's own fields (id,
// generation, times, workspace, agent, metadata, messages, files); its
// records travel beside it. Artifact content is base64. Checkpoints are the
// session's loop checkpoints (the latest of each run not yet ended, message
// counts included) and Workflows the workflow checkpoints the session owns,
// so that after import into another workspace resumeRun and a resumable
// workflow continue where they stopped. Both are left out when empty, so an
// envelope without them is the envelope of earlier builds; a reader that
// does not know them refuses the document (an unknown top-level key) rather
// than drop them. schema_version stays 1.
type Envelope struct {
	SchemaVersion int                      `json:"schema_version"`
	Session       *session.Snapshot        `json:"session"`
	Artifacts     []session.Artifact       `json:"artifacts"`
	Traces        []session.Trace          `json:"traces"`
	Runs          []session.Run            `json:"runs"`
	Verifications []session.Verification   `json:"verifications"`
	SubagentTasks []session.SubagentTask   `json:"subagent_tasks"`
	Handoff       *session.Handoff         `json:"handoff"`
	Runtime       *session.Runtime         `json:"runtime"`
	Checkpoints   []session.LoopCheckpoint `json:"checkpoints,omitempty"`
	Workflows     []session.Workflow       `json:"workflows,omitempty"`
}
