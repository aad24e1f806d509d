package session

import (
	"encoding/json"
	"time"
)

// SchemaVersion is the newest schema version this build reads and writes.
const SchemaVersion = 1

// Value is opaque host data kept as raw JSON text: a message, trace data, a
// loop state, a step result, a metadata value. cairn never interprets it
// beyond checking that it is valid JSON, and hands it back byte for byte.
type Value = json.RawMessage

// Run statuses.
const (
	RunRunning     = "running"
	RunCompleted   = "completed"
	RunInterrupted = "interrupted"
	RunFailed      = "failed"
)

// Verification check statuses.
const (
	CheckPassed  = "passed"
	CheckFailed  = "failed"
	CheckSkipped = "skipped"
	CheckNotRun  = "not_run"
)

// Snapshot is one complete generation of a session.
type Snapshot struct {
	SchemaVersion int              `json:"schema_version"`
	SessionID     string           `json:"session_id"`
	Generation    uint64           `json:"generation"`
	CreatedAt     time.Time        `json:"created_at"`
	UpdatedAt     time.Time        `json:"updated_at"`
	Workspace     *Workspace       `json:"workspace,omitempty"`
	Agent         map[string]Value `json:"agent,omitempty"`
	Metadata      map[string]Value `json:"metadata,omitempty"`
	Messages      []Value          `json:"messages"`
	Artifacts     []Artifact       `json:"artifacts,omitempty"`
	Traces        []Trace          `json:"traces,omitempty"`
	Runs          []Run            `json:"runs,omitempty"`
	Verifications []Verification   `json:"verifications,omitempty"`
	SubagentTasks []SubagentTask   `json:"subagent_tasks,omitempty"`
	Handoff       *Handoff         `json:"handoff,omitempty"`
	Runtime       *Runtime         `json:"runtime,omitempty"`
	Files         *ManifestRef     `json:"files,omitempty"`
}

// Workspace describes the tree a session worked in.
type Workspace struct {
	Root      string `json:"root,omitempty"`
	GitHead   string `json:"git_head,omitempty"`
	GitBranch string `json:"git_branch,omitempty"`
	GitDirty  bool   `json:"git_dirty,omitempty"`
}

// Artifact is a file-like output of a session: inline bytes or a workspace
// path. When Data is set, SHA256 and Size describe it (Normalize fills them
// in and rejects a mismatch).
type Artifact struct {
	ID        string `json:"id"`
	Kind      string `json:"kind,omitempty"`
	Name      string `json:"name,omitempty"`
	MediaType string `json:"media_type,omitempty"`
	RunID     string `json:"run_id,omitempty"`
	SHA256    string `json:"sha256,omitempty"`
	Size      int64  `json:"size,omitempty"`
	Data      []byte `json:"data,omitempty"`
	Path      string `json:"path,omitempty"`
	// Metadata is free-form JSON the host attaches to the artifact. It is
	// listed with the artifact (Store.Artifacts without data), so a host
	// can find an artifact without reading its bytes.
	Metadata Value `json:"metadata,omitempty"`
}

// Trace is one event in a session's execution trace.
type Trace struct {
	Seq   uint64    `json:"seq"`
	Time  time.Time `json:"time"`
	RunID string    `json:"run_id,omitempty"`
	Type  string    `json:"type"`
	Data  Value     `json:"data,omitempty"`
}

// Usage counts the tokens and cost of a run.
type Usage struct {
	InputTokens  int64   `json:"input_tokens"`
	OutputTokens int64   `json:"output_tokens"`
	TotalTokens  int64   `json:"total_tokens"`
	Cost         float64 `json:"cost"`
}

// Add returns the sum of u and v.
func (u Usage) Add(v Usage) Usage {
	return Usage{
		InputTokens:  u.InputTokens + v.InputTokens,
		OutputTokens: u.OutputTokens + v.OutputTokens,
		TotalTokens:  u.TotalTokens + v.TotalTokens,
		Cost:         u.Cost + v.Cost,
	}
}

// Run is one agent loop execution inside a session.
type Run struct {
	RunID          string     `json:"run_id"`
	Status         string     `json:"status"`
	ParentRunID    string     `json:"parent_run_id,omitempty"`
	StartedAt      time.Time  `json:"started_at"`
	EndedAt        *time.Time `json:"ended_at,omitempty"`
	Usage          Usage      `json:"usage"`
	ToolCallsCount int64      `json:"tool_calls_count"`
}

// Verification is a report of checks run against the session's work.
type Verification struct {
	ID      string  `json:"id"`
	RunID   string  `json:"run_id,omitempty"`
	Checks  []Check `json:"checks"`
	Summary string  `json:"summary,omitempty"`
}

// Check is one verification check with the exact command that ran.
type Check struct {
	Name    string `json:"name"`
	Command string `json:"command,omitempty"`
	Status  string `json:"status"`
	Output  string `json:"output,omitempty"`
}

// SubagentTask is work delegated to another agent.
type SubagentTask struct {
	TaskID    string `json:"task_id"`
	Agent     string `json:"agent,omitempty"`
	Status    string `json:"status,omitempty"`
	Brief     string `json:"brief,omitempty"`
	Result    Value  `json:"result,omitempty"`
	SessionID string `json:"session_id,omitempty"`
}

// Handoff is what the next agent or person needs to pick the work up.
type Handoff struct {
	Done             []string         `json:"done,omitempty"`
	InProgress       []string         `json:"in_progress,omitempty"`
	Verified         []string         `json:"verified,omitempty"`
	Unverified       []string         `json:"unverified,omitempty"`
	Restart          *Restart         `json:"restart,omitempty"`
	ReviewedVersion  *ReviewedVersion `json:"reviewed_version,omitempty"`
	Risks            []string         `json:"risks,omitempty"`
	DecisionsPending []string         `json:"decisions_pending,omitempty"`
	NextStep         *NextStep        `json:"next_step,omitempty"`
}

// Restart is how to bring the work's processes back.
type Restart struct {
	Workdir     string   `json:"workdir,omitempty"`
	Commands    []string `json:"commands,omitempty"`
	Config      []string `json:"config,omitempty"` // config keys or files, never values
	HealthCheck string   `json:"health_check,omitempty"`
}

// ReviewedVersion names the version of the work that was reviewed.
type ReviewedVersion struct {
	VCS        string `json:"vcs,omitempty"`
	Commit     string `json:"commit,omitempty"`
	DiffSHA256 string `json:"diff_sha256,omitempty"`
}

// NextStep is one bounded next step and the condition that says it is done.
type NextStep struct {
	Task     string `json:"task"`
	DoneWhen string `json:"done_when"`
}

// Runtime records the processes and previews the work depended on. They are
// ephemeral: cairn records how to restart them, never that they are alive.
type Runtime struct {
	Processes []Process `json:"processes,omitempty"`
	Previews  []Preview `json:"previews,omitempty"`
}

// Process is a recorded process. Only environment variable names are kept,
// never their values.
type Process struct {
	Name        string       `json:"name"`
	Command     []string     `json:"command"`
	Cwd         string       `json:"cwd,omitempty"`
	EnvKeys     []string     `json:"env_keys,omitempty"`
	Port        int          `json:"port,omitempty"`
	HealthCheck *HealthCheck `json:"health_check,omitempty"`
}

// HealthCheck is a command with an expected exit code, or a loopback HTTP URL
// with an expected status.
type HealthCheck struct {
	Command      []string `json:"command,omitempty"`
	ExpectExit   int      `json:"expect_exit,omitempty"`
	URL          string   `json:"url,omitempty"`
	ExpectStatus int      `json:"expect_status,omitempty"`
}

// Preview is a URL served by a recorded process.
type Preview struct {
	URL     string `json:"url"`
	Process string `json:"process,omitempty"`
}

// ManifestRef points at the workspace manifest recorded with a generation.
// Inexact is set when the manifest was taken from an index that may lag
// the tree (the tracker was polling, past the inotify watch limit): a
// change made shortly before the commit may be missing from it, and is
// then reported as drift on resume.
type ManifestRef struct {
	ID      string `json:"id,omitempty"`
	Clock   string `json:"clock,omitempty"`
	Entries int64  `json:"entries,omitempty"`
	Inexact bool   `json:"inexact,omitempty"`
}

// LoopCheckpoint is the boundary after a completed tool turn of a run. It is
// committed atomically with the messages of that turn.
type LoopCheckpoint struct {
	RunID          string    `json:"run_id"`
	SessionID      string    `json:"session_id"`
	Turn           int64     `json:"turn"`
	MessageCount   int64     `json:"message_count"` // set by Apply: session messages at the boundary
	Usage          Usage     `json:"usage"`
	ToolCallsCount int64     `json:"tool_calls_count"`
	State          Value     `json:"state,omitempty"`
	CreatedAt      time.Time `json:"created_at"`
	// Files is the workspace manifest at the boundary, when the workspace
	// is tracked: what ResumeRun compares with to name the files touched
	// after the checkpoint.
	Files *ManifestRef `json:"files,omitempty"`
}

// Workflow is the checkpoint of a resumable workflow: its completed steps.
type Workflow struct {
	SchemaVersion int          `json:"schema_version"`
	WorkflowID    string       `json:"workflow_id"`
	SessionID     string       `json:"session_id,omitempty"` // owner; deleting the session deletes the workflow
	Steps         []StepRecord `json:"steps"`                // in completion order
}

// StepRecord is one successfully completed workflow step.
type StepRecord struct {
	StepID      string    `json:"step_id"`
	Identity    string    `json:"identity"`
	Result      Value     `json:"result,omitempty"`
	CompletedAt time.Time `json:"completed_at"`
}

// Step returns the record of stepID, or nil.
func (w *Workflow) Step(stepID string) *StepRecord {
	for i := range w.Steps {
		if w.Steps[i].StepID == stepID {
			return &w.Steps[i]
		}
	}
	return nil
}

// State is everything a store keeps for one session at one generation: the
// snapshot and the loop checkpoints of its runs.
type State struct {
	Snapshot    *Snapshot                  `json:"snapshot"`
	Checkpoints map[string]*LoopCheckpoint `json:"checkpoints,omitempty"`
}

// Summary describes a session without its content.
type Summary struct {
	SessionID     string         `json:"session_id"`
	Generation    uint64         `json:"generation"`
	CreatedAt     time.Time      `json:"created_at"`
	UpdatedAt     time.Time      `json:"updated_at"`
	MessageCount  int64          `json:"message_count"`
	ArtifactCount int64          `json:"artifact_count"`
	TraceCount    int64          `json:"trace_count"`
	Runs          map[string]int `json:"runs,omitempty"` // count by status
	Checkpoints   int            `json:"checkpoints"`
	// SizeBytes is what the session takes in storage, history included
	// (0 for a memory store); LiveBytes is the encoded size of its latest
	// generation, what a full read moves and what the store's session
	// size limit counts.
	SizeBytes int64 `json:"size_bytes"`
	LiveBytes int64 `json:"live_bytes"`
	// State is absent for a session the store serves. Otherwise the
	// store keeps its data but serves none of it, and State says why:
	// "corrupt" (damaged bytes with intact commits after them),
	// "schema_unsupported" (written by a newer cairn) or "unreadable" (the
	// file cannot be opened). Problem is the error every call on the
	// session answers; the other fields describe what could be read.
	State   string `json:"state,omitempty"`
	Problem string `json:"problem,omitempty"`
}
