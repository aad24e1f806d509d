//! The objects of cairn (docs/DESIGN.md §2) and the results of its methods, as
//! serde types whose field names are the wire names.
//!
//! Opaque host data (messages, loop state, step results, metadata and agent
//! values, trace data) is `serde_json::Value`. Times are RFC 3339 strings as
//! the library writes them. Results tolerate fields this crate does not know,
//! so a newer library or daemon does not break an older client; requests
//! carry only known fields, since the library rejects unknown ones.
//!
//! A struct whose every field may be absent says so once, with
//! `#[serde(default)]` on the struct; the others mark their optional
//! fields one by one.

use serde::{Deserialize, Deserializer, Serialize};
use serde_json::{Map, Value};
use std::borrow::Cow;
use std::collections::BTreeMap;

/// Reads JSON `null` as the type's default (Go writes empty slices and maps
/// as `null`).
fn nullable<'de, D, T>(d: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de> + Default,
{
    Ok(Option::<T>::deserialize(d)?.unwrap_or_default())
}

fn is_zero_i64(v: &i64) -> bool {
    *v == 0
}

fn is_false(v: &bool) -> bool {
    !*v
}

/// Run statuses.
pub mod run_status {
    /// The run is going on (or its process died without completing it).
    pub const RUNNING: &str = "running";
    /// The run finished its work.
    pub const COMPLETED: &str = "completed";
    /// The run was stopped and may be resumed.
    pub const INTERRUPTED: &str = "interrupted";
    /// The run failed.
    pub const FAILED: &str = "failed";
}

/// One complete generation of a session.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Snapshot {
    /// The schema version (1 today; 0 on a request means "current").
    pub schema_version: i64,
    /// The session's id (may be empty on save: the save's id is used).
    pub session_id: String,
    /// The generation, assigned by the store.
    pub generation: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub created_at: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub updated_at: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub workspace: Option<Workspace>,
    /// Free-form agent description (harness, model, ...).
    #[serde(deserialize_with = "nullable", skip_serializing_if = "Map::is_empty")]
    pub agent: Map<String, Value>,
    #[serde(deserialize_with = "nullable", skip_serializing_if = "Map::is_empty")]
    pub metadata: Map<String, Value>,
    /// The conversation: opaque host values, in order.
    #[serde(deserialize_with = "nullable")]
    pub messages: Vec<Value>,
    #[serde(deserialize_with = "nullable", skip_serializing_if = "Vec::is_empty")]
    pub artifacts: Vec<Artifact>,
    #[serde(deserialize_with = "nullable", skip_serializing_if = "Vec::is_empty")]
    pub traces: Vec<Trace>,
    #[serde(deserialize_with = "nullable", skip_serializing_if = "Vec::is_empty")]
    pub runs: Vec<Run>,
    #[serde(deserialize_with = "nullable", skip_serializing_if = "Vec::is_empty")]
    pub verifications: Vec<Verification>,
    #[serde(deserialize_with = "nullable", skip_serializing_if = "Vec::is_empty")]
    pub subagent_tasks: Vec<SubagentTask>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub handoff: Option<Handoff>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub runtime: Option<Runtime>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub files: Option<ManifestRef>,
}

/// What one commit adds to a session: a delta. Messages, traces and
/// artifacts are appended; runs, verifications and subagent tasks upserted
/// by id; workspace, agent, handoff, runtime and files replaced when set;
/// metadata merged key by key (a `null` value removes the key). `replace`
/// makes the change a whole snapshot instead.
///
/// A delta also edits what is there, at the cost of what it writes:
/// `truncate_messages` keeps the first N messages (applied before
/// `append_messages`, so truncating to i and appending replaces the
/// messages from index i on: the compaction case); `delete_artifacts`
/// removes artifacts by id (before `append_artifacts`) and `put_artifacts`
/// inserts or replaces them (after it). `append_artifacts` only adds: an id
/// the session already holds is refused with `conflict` naming the id.
/// Truncating past the end is `invalid_argument`; deleting an artifact the
/// session does not hold is `not_found`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Change {
    #[serde(skip_serializing_if = "is_zero_i64")]
    pub schema_version: i64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub replace: Option<Box<Snapshot>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub workspace: Option<Workspace>,
    #[serde(deserialize_with = "nullable", skip_serializing_if = "Option::is_none")]
    pub agent: Option<Map<String, Value>>,
    #[serde(deserialize_with = "nullable", skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Map<String, Value>>,
    #[serde(deserialize_with = "nullable", skip_serializing_if = "Vec::is_empty")]
    pub append_messages: Vec<Value>,
    #[serde(deserialize_with = "nullable", skip_serializing_if = "Vec::is_empty")]
    pub append_traces: Vec<Trace>,
    #[serde(deserialize_with = "nullable", skip_serializing_if = "Vec::is_empty")]
    pub append_artifacts: Vec<Artifact>,
    /// Keep only the first N messages (before `append_messages`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub truncate_messages: Option<u64>,
    /// Artifact ids to remove (before `append_artifacts`).
    #[serde(deserialize_with = "nullable", skip_serializing_if = "Vec::is_empty")]
    pub delete_artifacts: Vec<String>,
    /// Artifacts to insert or replace by id (after `append_artifacts`).
    #[serde(deserialize_with = "nullable", skip_serializing_if = "Vec::is_empty")]
    pub put_artifacts: Vec<Artifact>,
    #[serde(deserialize_with = "nullable", skip_serializing_if = "Vec::is_empty")]
    pub upsert_runs: Vec<Run>,
    #[serde(deserialize_with = "nullable", skip_serializing_if = "Vec::is_empty")]
    pub upsert_verifications: Vec<Verification>,
    #[serde(deserialize_with = "nullable", skip_serializing_if = "Vec::is_empty")]
    pub upsert_subagent_tasks: Vec<SubagentTask>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub handoff: Option<Handoff>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub runtime: Option<Runtime>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub files: Option<ManifestRef>,
    /// A loop checkpoint written atomically with the change (what
    /// `checkpoint` sends; a host rarely sets it itself).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub checkpoint: Option<LoopCheckpoint>,
    /// Run ids whose loop checkpoints the change deletes.
    #[serde(deserialize_with = "nullable", skip_serializing_if = "Vec::is_empty")]
    pub drop_checkpoints: Vec<String>,
}

impl Change {
    /// A change that appends `messages`.
    pub fn append_messages(messages: impl IntoIterator<Item = Value>) -> Change {
        Change {
            append_messages: messages.into_iter().collect(),
            ..Change::default()
        }
    }
}

/// The tree a session worked in.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Workspace {
    #[serde(skip_serializing_if = "String::is_empty")]
    pub root: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub git_head: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub git_branch: String,
    #[serde(skip_serializing_if = "is_false")]
    pub git_dirty: bool,
}

/// A file-like output of a session: inline bytes (`data`, base64) or a
/// workspace `path`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Artifact {
    pub id: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub kind: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub media_type: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub run_id: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub sha256: String,
    #[serde(default, skip_serializing_if = "is_zero_i64")]
    pub size: i64,
    /// The bytes, base64 (standard alphabet, padded). See
    /// [`Artifact::with_bytes`] and [`Artifact::bytes`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<String>,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub path: String,
    /// Free-form JSON the host attaches to the artifact. It is listed with
    /// the artifact ([`crate::Client::artifacts`], without data), so a host
    /// can find an artifact without reading its bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Value>,
}

impl Artifact {
    /// An artifact holding `bytes` inline (the library fills in sha256 and
    /// size).
    pub fn with_bytes(id: impl Into<String>, bytes: &[u8]) -> Artifact {
        Artifact {
            id: id.into(),
            data: Some(crate::base64::encode(bytes)),
            ..Artifact::default()
        }
    }

    /// The inline bytes, decoded; `None` when the artifact has none.
    pub fn bytes(&self) -> Option<crate::Result<Vec<u8>>> {
        self.data.as_deref().map(crate::base64::decode)
    }
}

/// One event in a session's execution trace.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Trace {
    #[serde(default)]
    pub seq: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time: Option<String>,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub run_id: String,
    #[serde(rename = "type")]
    pub kind: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<Value>,
}

/// Tokens and cost of a run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Usage {
    pub input_tokens: i64,
    pub output_tokens: i64,
    pub total_tokens: i64,
    pub cost: f64,
}

/// One agent loop execution inside a session.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Run {
    pub run_id: String,
    /// One of [`run_status`].
    pub status: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub parent_run_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ended_at: Option<String>,
    #[serde(default)]
    pub usage: Usage,
    #[serde(default)]
    pub tool_calls_count: i64,
}

/// A report of checks run against the session's work.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Verification {
    pub id: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub run_id: String,
    #[serde(default, deserialize_with = "nullable")]
    pub checks: Vec<Check>,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub summary: String,
}

/// One verification check with the exact command that ran.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Check {
    pub name: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub command: String,
    /// passed, failed, skipped or not_run.
    pub status: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub output: String,
}

/// Work delegated to another agent.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SubagentTask {
    pub task_id: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub agent: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub status: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub brief: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<Value>,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub session_id: String,
}

/// What the next agent or person needs to pick the work up.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Handoff {
    #[serde(deserialize_with = "nullable", skip_serializing_if = "Vec::is_empty")]
    pub done: Vec<String>,
    #[serde(deserialize_with = "nullable", skip_serializing_if = "Vec::is_empty")]
    pub in_progress: Vec<String>,
    #[serde(deserialize_with = "nullable", skip_serializing_if = "Vec::is_empty")]
    pub verified: Vec<String>,
    #[serde(deserialize_with = "nullable", skip_serializing_if = "Vec::is_empty")]
    pub unverified: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub restart: Option<Restart>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reviewed_version: Option<ReviewedVersion>,
    #[serde(deserialize_with = "nullable", skip_serializing_if = "Vec::is_empty")]
    pub risks: Vec<String>,
    #[serde(deserialize_with = "nullable", skip_serializing_if = "Vec::is_empty")]
    pub decisions_pending: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_step: Option<NextStep>,
}

/// How to bring the work's processes back.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Restart {
    #[serde(skip_serializing_if = "String::is_empty")]
    pub workdir: String,
    #[serde(deserialize_with = "nullable", skip_serializing_if = "Vec::is_empty")]
    pub commands: Vec<String>,
    /// Config keys or files, never values.
    #[serde(deserialize_with = "nullable", skip_serializing_if = "Vec::is_empty")]
    pub config: Vec<String>,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub health_check: String,
}

/// The version of the work that was reviewed.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ReviewedVersion {
    #[serde(skip_serializing_if = "String::is_empty")]
    pub vcs: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub commit: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub diff_sha256: String,
}

/// One bounded next step and the condition that says it is done.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct NextStep {
    pub task: String,
    pub done_when: String,
}

/// The processes and previews the work depended on (ephemeral).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Runtime {
    #[serde(deserialize_with = "nullable", skip_serializing_if = "Vec::is_empty")]
    pub processes: Vec<Process>,
    #[serde(deserialize_with = "nullable", skip_serializing_if = "Vec::is_empty")]
    pub previews: Vec<Preview>,
}

/// A recorded process: environment variable names only, never values.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Process {
    pub name: String,
    #[serde(default, deserialize_with = "nullable")]
    pub command: Vec<String>,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub cwd: String,
    #[serde(
        default,
        deserialize_with = "nullable",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub env_keys: Vec<String>,
    #[serde(default, skip_serializing_if = "is_zero_i64")]
    pub port: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub health_check: Option<HealthCheck>,
}

/// A command with an expected exit code, or a loopback URL with an expected
/// HTTP status.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct HealthCheck {
    #[serde(deserialize_with = "nullable", skip_serializing_if = "Vec::is_empty")]
    pub command: Vec<String>,
    #[serde(skip_serializing_if = "is_zero_i64")]
    pub expect_exit: i64,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub url: String,
    #[serde(skip_serializing_if = "is_zero_i64")]
    pub expect_status: i64,
}

/// A URL served by a recorded process.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Preview {
    pub url: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub process: String,
}

/// The workspace manifest recorded with a generation.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ManifestRef {
    #[serde(skip_serializing_if = "String::is_empty")]
    pub id: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub clock: String,
    #[serde(skip_serializing_if = "is_zero_i64")]
    pub entries: i64,
    /// Set when the manifest was taken while the tracker was polling (past
    /// the inotify watch limit): it may miss changes made shortly before
    /// the commit.
    #[serde(skip_serializing_if = "is_false")]
    pub inexact: bool,
}

/// The boundary after a completed tool turn of a run (as stored; found in
/// exported envelopes).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct LoopCheckpoint {
    pub run_id: String,
    #[serde(default)]
    pub session_id: String,
    #[serde(default)]
    pub turn: i64,
    #[serde(default)]
    pub message_count: i64,
    #[serde(default)]
    pub usage: Usage,
    #[serde(default)]
    pub tool_calls_count: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub created_at: Option<String>,
    /// The workspace manifest at the boundary.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub files: Option<ManifestRef>,
}

/// One successfully completed workflow step.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct StepRecord {
    pub step_id: String,
    pub identity: String,
    /// The step's result as recorded (`None` when it recorded none).
    #[serde(default)]
    pub result: Option<Value>,
    #[serde(default)]
    pub completed_at: String,
}

/// The checkpoint of a resumable workflow, as an exported envelope carries
/// it: its completed steps, in completion order.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Workflow {
    #[serde(default)]
    pub schema_version: i64,
    pub workflow_id: String,
    /// The owning session (deleting it deletes the workflow).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub session_id: String,
    #[serde(deserialize_with = "nullable")]
    pub steps: Vec<StepRecord>,
}

/// A workflow step's id and the digest of its spec.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StepSpec {
    pub step_id: String,
    pub identity: String,
}

impl StepSpec {
    pub fn new(step_id: impl Into<String>, identity: impl Into<String>) -> StepSpec {
        StepSpec {
            step_id: step_id.into(),
            identity: identity.into(),
        }
    }
}

/// A session described without its content (`list_sessions`, `summary`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    pub session_id: String,
    #[serde(default)]
    pub generation: u64,
    #[serde(default)]
    pub created_at: String,
    #[serde(default)]
    pub updated_at: String,
    #[serde(default)]
    pub message_count: i64,
    #[serde(default)]
    pub artifact_count: i64,
    #[serde(default)]
    pub trace_count: i64,
    /// Run count by status.
    #[serde(default, deserialize_with = "nullable")]
    pub runs: BTreeMap<String, i64>,
    #[serde(default)]
    pub checkpoints: i64,
    /// What the session takes in storage, history included.
    #[serde(default)]
    pub size_bytes: i64,
    /// The encoded size of the latest generation: what a full read moves
    /// and what the store's session size limit counts.
    #[serde(default)]
    pub live_bytes: i64,
    /// `None` for a session the store serves. Otherwise the store keeps
    /// its data but serves none of it, and this says why: "corrupt",
    /// "schema_unsupported" or "unreadable" (see [`session_state`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<String>,
    /// The error every call on a damaged session answers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub problem: Option<String>,
}

/// The states of a session (or workflow) the store keeps but does not
/// serve ([`Summary::state`], [`Problem::state`], [`RepairReport::state`]).
pub mod session_state {
    /// Damaged bytes with intact commits after them: `cairn repair` keeps
    /// what is intact.
    pub const CORRUPT: &str = "corrupt";
    /// Written by a newer cairn.
    pub const SCHEMA_UNSUPPORTED: &str = "schema_unsupported";
    /// The file cannot be opened (permissions, an immutable flag, a link).
    pub const UNREADABLE: &str = "unreadable";
}

/// Workspace files changed since a generation was saved. `tracked` false
/// means drift is unknown, not "no changes".
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Drift {
    pub tracked: bool,
    /// Why drift is not tracked, when it is not.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub reason: String,
    #[serde(deserialize_with = "nullable")]
    pub added: Vec<String>,
    #[serde(deserialize_with = "nullable")]
    pub modified: Vec<String>,
    #[serde(deserialize_with = "nullable")]
    pub deleted: Vec<String>,
}

/// A run left with a loop checkpoint it can be resumed from.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct InterruptedRun {
    pub run_id: String,
    /// "running" (left running) or "interrupted" (resumed as `resumed_as`,
    /// which has not checkpointed yet).
    #[serde(default)]
    pub status: String,
    #[serde(default)]
    pub resumed_as: String,
    #[serde(default)]
    pub turn: i64,
    #[serde(default)]
    pub message_count: i64,
    #[serde(default)]
    pub usage: Usage,
    #[serde(default)]
    pub tool_calls_count: i64,
    #[serde(default)]
    pub checkpointed_at: String,
}

/// The result of `resume_session`: what a new agent is handed.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ResumeSessionResult {
    #[serde(deserialize_with = "nullable")]
    pub snapshot: Snapshot,
    pub generation: u64,
    /// The session's message count.
    pub message_count: u64,
    /// The index of `snapshot.messages[0]` (0 unless a tail was asked for).
    pub messages_from: u64,
    pub drift: Drift,
    #[serde(deserialize_with = "nullable")]
    pub interrupted_runs: Vec<InterruptedRun>,
    /// The live state of each recorded runtime process, from its health
    /// check run during the resume. Nothing is restarted: the caller
    /// decides ([`crate::Client::runtime_restart`]).
    #[serde(deserialize_with = "nullable")]
    pub processes: Vec<ProcessState>,
}

/// The result of `begin_run`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct BeginRunResult {
    pub run_id: String,
    #[serde(default)]
    pub generation: u64,
}

/// The params of `checkpoint`: the boundary after a completed tool turn.
/// `usage` and `tool_calls_count` are the run's totals so far.
/// Borrowed fields are `Cow`s: `"r1".into()`, `(&messages[..]).into()`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CheckpointRequest<'a> {
    pub run_id: Cow<'a, str>,
    /// Optional: the session that must own the run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<Cow<'a, str>>,
    pub turn: i64,
    /// The turn's messages, committed atomically with the checkpoint.
    #[serde(default, deserialize_with = "nullable")]
    pub new_messages: Cow<'a, [Value]>,
    #[serde(default)]
    pub usage: Usage,
    #[serde(default)]
    pub tool_calls_count: i64,
    /// The host's opaque loop state.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<Cow<'a, Value>>,
}

/// The result of `checkpoint`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct CheckpointResult {
    pub generation: u64,
    /// Session messages at the boundary.
    pub message_count: i64,
}

/// The params of `complete_run`. `usage` and `tool_calls_count`, when set,
/// are the run's final totals.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CompleteRunRequest<'a> {
    pub run_id: Cow<'a, str>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<Cow<'a, str>>,
    /// completed, failed or interrupted (see [`run_status`]).
    pub status: Cow<'a, str>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<Usage>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_calls_count: Option<i64>,
}

/// The result of `resume_run`: what the host needs to continue the loop.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ResumeRunResult {
    /// The new run's id.
    pub run_id: String,
    pub resumed_from: String,
    #[serde(default)]
    pub session_id: String,
    /// The session's messages up to the checkpoint boundary.
    #[serde(default, deserialize_with = "nullable")]
    pub messages: Vec<Value>,
    #[serde(default)]
    pub turn: i64,
    /// Carried on from the checkpoint, never from zero.
    #[serde(default)]
    pub usage: Usage,
    #[serde(default)]
    pub tool_calls_count: i64,
    #[serde(default)]
    pub state: Option<Value>,
    #[serde(default, deserialize_with = "nullable")]
    pub files_touched_after_checkpoint: Vec<String>,
    #[serde(default)]
    pub files_tracked: bool,
}

/// The result of `fork`, `import` and `importFile`: the new session and its
/// generation.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ForkResult {
    pub session_id: String,
    #[serde(default)]
    pub generation: u64,
}

/// The result of `import` and `importFile`: the imported session and its
/// generation.
pub type ImportResult = ForkResult;

/// The result of `status` through libcairn: the handle's mode, and the
/// daemon's own status in daemon mode.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct LibStatus {
    /// "embedded" or "daemon".
    pub mode: String,
    #[serde(default)]
    pub version: String,
    #[serde(default)]
    pub workspace: String,
    /// The pid of this process.
    #[serde(default)]
    pub pid: i64,
    /// The daemon's status (daemon mode).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub daemon: Option<StatusResult>,
}

/// The daemon's own status (the wire's status result).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct StatusResult {
    pub server_version: String,
    pub protocol_version: i64,
    pub workspace: String,
    pub socket: String,
    pub pid: i64,
    pub started_at: String,
    pub uptime_ms: i64,
    pub connections: i64,
    pub subscribers: i64,
    pub in_flight: i64,
    pub requests: u64,
    pub events_dropped: u64,
    /// "serving" or "stopping".
    pub state: String,
    /// The workspace tracker's status; `None`: the workspace is not
    /// tracked.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub files: Option<FilesStatus>,
}

/// The daemon's workspace tracker.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct FilesStatus {
    pub root: String,
    /// "watching" or "polling".
    pub mode: String,
    /// Why the tracker polls, naming the limit to raise.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub warning: String,
    pub clock: String,
    /// Indexed non-directory paths.
    pub files: i64,
    /// Indexed directories, the root included.
    pub dirs: i64,
    /// inotify watches held.
    pub watches: i64,
    pub events: u64,
    pub rescans: u64,
    pub overflows: u64,
}

/// The result of `hello`: the daemon's (daemon mode) or the engine's
/// (embedded mode) identity, capabilities and limits.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct HelloResult {
    pub server_version: String,
    pub protocol_version: i64,
    pub workspace: String,
    pub pid: i64,
    pub capabilities: HelloCapabilities,
    pub limits: Limits,
}

/// What a daemon (or engine) offers.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct HelloCapabilities {
    pub store: Capabilities,
    /// Every method served.
    #[serde(deserialize_with = "nullable")]
    pub methods: Vec<String>,
    /// Every event that can be pushed.
    #[serde(deserialize_with = "nullable")]
    pub events: Vec<String>,
}

/// What the store guarantees.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Capabilities {
    pub atomic_generations: bool,
    pub delta_commits: bool,
    pub compare_and_swap: bool,
    pub cross_process_lock: bool,
    pub durable: bool,
    pub history: bool,
}

/// The daemon's limits (PROTOCOL.md §8).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Limits {
    pub max_message_size: i64,
    pub max_nested_levels: i64,
    pub max_array_elements: i64,
    pub max_map_pairs: i64,
    pub max_in_flight_per_conn: i64,
    pub event_queue_len: i64,
}

/// The result of `changes`: what changed in the workspace tree after a
/// clock.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ChangeSet {
    /// Pass it as `since` next time.
    pub clock: String,
    /// true: `since` was empty, stale or from another daemon, and `added`
    /// lists every file.
    pub fresh_instance: bool,
    #[serde(deserialize_with = "nullable")]
    pub added: Vec<String>,
    #[serde(deserialize_with = "nullable")]
    pub modified: Vec<String>,
    #[serde(deserialize_with = "nullable")]
    pub deleted: Vec<String>,
}

/// The result of `handoff`: HANDOFF.md rendered from the latest
/// generation's evidence, and what the handoff lacks.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct HandoffResult {
    pub session_id: String,
    pub generation: u64,
    pub markdown: String,
    /// Nothing required is missing (which does not mean the work is right).
    pub complete: bool,
    #[serde(deserialize_with = "nullable")]
    pub missing: Vec<HandoffMissing>,
    /// The files changed in the session, per its first and latest
    /// manifests.
    pub files: Drift,
}

/// A required part a handoff lacks.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct HandoffMissing {
    /// result, verification, restart_path, reviewed_version,
    /// risks_decisions or next_step.
    pub key: String,
    /// A sentence for people.
    pub message: String,
}

/// Process states ([`ProcessState::state`]).
pub mod process_state {
    /// Nothing answers: connection refused, nothing listening on the
    /// recorded port.
    pub const NOT_RUNNING: &str = "not_running";
    /// The health check passed.
    pub const HEALTHY: &str = "healthy";
    /// Something answers, but with the wrong status or exit code, or not
    /// within the timeout.
    pub const UNHEALTHY: &str = "unhealthy";
    /// There is no way to tell (no health check to run, one that cannot
    /// run or is refused).
    pub const UNKNOWN: &str = "unknown";
}

/// The live state of a recorded process, from its health check run now.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProcessState {
    pub name: String,
    /// One of [`process_state`].
    pub state: String,
    /// What was tried and what it answered.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub detail: String,
}

/// A recorded preview with the state of its process.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PreviewState {
    pub url: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub process: String,
    /// The process's state; unknown without one.
    #[serde(default)]
    pub state: String,
}

/// The result of `runtime_check`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct RuntimeCheckResult {
    #[serde(deserialize_with = "nullable")]
    pub processes: Vec<ProcessState>,
    #[serde(deserialize_with = "nullable")]
    pub previews: Vec<PreviewState>,
}

/// Outcomes of `runtime_restart` ([`RestartResult::outcome`]).
pub mod restart_outcome {
    /// Started now (and proven healthy, unless the state says unknown).
    pub const STARTED: &str = "started";
    /// The health check passed; nothing was started.
    pub const ALREADY_HEALTHY: &str = "already_healthy";
    /// Not started, or started and killed again; see `error`.
    pub const FAILED: &str = "failed";
}

/// The result of `runtime_restart`. A process that does not come up is
/// reported here (outcome "failed"), not as an error.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RestartResult {
    pub name: String,
    /// One of [`restart_outcome`].
    pub outcome: String,
    /// The process's state when the restart returned.
    #[serde(default)]
    pub state: String,
    /// The started process, which leads its own process group.
    #[serde(default, skip_serializing_if = "is_zero_i64")]
    pub pid: i64,
    #[serde(default)]
    pub took_ms: i64,
    /// What proved the outcome, or the last failure.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub detail: String,
    /// The file the process's output goes to (under `.cairn/logs`).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub log: String,
    /// Recorded env_keys unset in the environment it started with (names
    /// only, never values).
    #[serde(
        default,
        deserialize_with = "nullable",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub missing_env: Vec<String>,
    /// Why it failed (outcome "failed").
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub error: String,
}

/// Something that happened, published after it is durable: `event` names
/// it (e.g. "session.committed") and `data` describes it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Event {
    pub event: String,
    #[serde(default)]
    pub data: Value,
}

/// Event names (`subscribe` filters).
pub mod events {
    /// {session_id, generation}: every commit.
    pub const SESSION_COMMITTED: &str = "session.committed";
    /// {session_id}.
    pub const SESSION_DELETED: &str = "session.deleted";
    /// {session_id, run_id, turn, generation}.
    pub const RUN_CHECKPOINTED: &str = "run.checkpointed";
    /// {session_id, run_id, status, generation}.
    pub const RUN_COMPLETED: &str = "run.completed";
    /// {session_id, run_id (new), resumed_from, generation}.
    pub const RUN_RESUMED: &str = "run.resumed";
    /// {workflow_id, step_id}.
    pub const WORKFLOW_STEP_COMPLETED: &str = "workflow.step_completed";
    /// {path, kind}: a workspace file was added, modified or deleted
    /// (daemon mode, or embedded mode over a tracked workspace); kind
    /// "overflow" with an empty path means events were lost: call
    /// `changes` again.
    pub const FILE_CHANGED: &str = "file.changed";
}

// The params and results of the methods that the client's calls build and
// decode (the Go names of package api). Borrowed fields are `Cow`s, so a
// call borrows what the caller holds and a decoded value owns its data.

/// The params or result of a method that has none: `{}`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Empty {}

/// The params of `save`: exactly one of `snapshot` and `change`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SaveRequest<'a> {
    pub session_id: Cow<'a, str>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub snapshot: Option<Cow<'a, Snapshot>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub change: Option<Cow<'a, Change>>,
    /// Fail with `conflict` unless the session is at this generation (0:
    /// it must not exist yet).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expect_generation: Option<u64>,
}

/// The result of `save`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct SaveResult {
    pub generation: u64,
}

/// The params of `begin_run`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct BeginRunRequest<'a> {
    pub session_id: Cow<'a, str>,
    /// `None`: cairn chooses a unique id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_id: Option<Cow<'a, str>>,
}

/// The result of `complete_run`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct CompleteRunResult {
    pub generation: u64,
}

/// The params of `resume_run`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResumeRunRequest<'a> {
    pub run_id: Cow<'a, str>,
    /// When set, must own the run (else `not_owner`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<Cow<'a, str>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub new_run_id: Option<Cow<'a, str>>,
    /// On a shared store: take the run from a host that still holds its lease.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub takeover: bool,
}

/// The params of `begin_workflow`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct BeginWorkflowRequest<'a> {
    pub workflow_id: Cow<'a, str>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<Cow<'a, str>>,
    #[serde(default, deserialize_with = "nullable")]
    pub steps: Cow<'a, [StepSpec]>,
    /// On a shared store: take the workflow from a host that still holds it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub takeover: bool,
}

/// The result of `begin_workflow`: the steps already completed.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct BeginWorkflowResult {
    #[serde(deserialize_with = "nullable")]
    pub completed: Vec<StepRecord>,
}

/// The params of `complete_step`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CompleteStepRequest<'a> {
    pub workflow_id: Cow<'a, str>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<Cow<'a, str>>,
    pub step_id: Cow<'a, str>,
    pub identity: Cow<'a, str>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<Cow<'a, Value>>,
}

/// The params of `finish_workflow`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorkflowParams<'a> {
    pub workflow_id: Cow<'a, str>,
}

/// The result of `list_sessions`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ListResult {
    #[serde(deserialize_with = "nullable")]
    pub sessions: Vec<Summary>,
}

/// The params of `fork`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ForkRequest<'a> {
    pub session_id: Cow<'a, str>,
    pub new_id: Cow<'a, str>,
    /// `None`: the latest generation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub at_generation: Option<u64>,
}

/// The result of `export` through libcairn: the envelope as JSON itself.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ExportResult {
    pub envelope: Value,
}

/// The params of `import`: an envelope (or a bare session) as JSON.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ImportParams<'a> {
    pub envelope: Cow<'a, Value>,
}

/// The params of `exportFile`: the session and the absolute path of the
/// file to write.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExportFileRequest<'a> {
    pub session_id: Cow<'a, str>,
    pub path: Cow<'a, str>,
}

/// The result of `exportFile`: the file written, its size in bytes and the
/// generation of the session it holds.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct ExportFileResult {
    pub path: String,
    pub bytes: u64,
    pub generation: u64,
}

/// One file `verify` found that is not served, or does not check.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Problem {
    /// "session", "workflow" or "manifest".
    pub kind: String,
    /// The session or workflow id ("" when unknown).
    pub id: String,
    pub path: String,
    /// "corrupt", "schema_unsupported" or "unreadable" ([`session_state`]).
    pub state: String,
    /// Where the intact data ends (-1 when unknown).
    pub offset: i64,
    /// The file's size.
    pub size: i64,
    /// The last generation (for a workflow, the last commit) that reads
    /// back intact.
    pub generation: u64,
    pub message: String,
}

/// The result of `verify`: what it checked and what it found. `ok` is true
/// when there are no problems; files kept in quarantine are listed but are
/// not problems.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct VerifyReport {
    pub ok: bool,
    /// Session logs checked.
    pub sessions: u64,
    /// Workflow logs checked.
    pub workflows: u64,
    /// Manifest files checked.
    pub manifests: u64,
    /// Bytes read and checked.
    pub bytes: u64,
    #[serde(deserialize_with = "nullable")]
    pub problems: Vec<Problem>,
    /// The files in the store's quarantine folder: damaged logs a repair
    /// moved aside, trimmed torn tails.
    #[serde(deserialize_with = "nullable")]
    pub quarantine: Vec<String>,
    /// The content scan, when `verify` was asked for it
    /// ([`VerifyRequest::secrets`]). Its findings are not problems.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub secrets: Option<SecretScan>,
}

/// The params of `verify`: `secrets` also scans every session's content
/// for credential-shaped strings (`VerifyRequest { secrets: true }`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct VerifyRequest {
    #[serde(skip_serializing_if = "is_false")]
    pub secrets: bool,
}

/// What `verify` with `secrets` scanned and found. Content is never
/// changed. `found` counts every finding; `findings` lists the first 1000.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct SecretScan {
    /// Sessions scanned (those the store serves).
    pub sessions: u64,
    pub messages: u64,
    pub artifacts: u64,
    pub traces: u64,
    /// Content bytes scanned.
    pub bytes: u64,
    pub found: u64,
    #[serde(deserialize_with = "nullable")]
    pub findings: Vec<SecretFinding>,
}

/// One credential-shaped string, by where it is, never by what it is.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct SecretFinding {
    pub session_id: String,
    /// "message", "trace", "artifact", "artifact_metadata", "agent" or
    /// "metadata".
    #[serde(rename = "where")]
    pub where_: String,
    /// The message's or trace's index (-1 otherwise).
    pub index: i64,
    /// The artifact's id, or the agent or metadata key.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// Where it starts, in bytes, in that item.
    pub offset: u64,
    /// The credential format, or "secret_key_name".
    pub rule: String,
    /// At most its first 4 characters and "…", never the secret.
    pub redacted: String,
}

/// The params of `repair`: one session or one workflow, and whether to
/// write the repair (`RepairRequest::session("s1").apply(true)`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct RepairRequest<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub session_id: Option<Cow<'a, str>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub workflow_id: Option<Cow<'a, str>>,
    /// Write the repair. Without it, `repair` only says what it would keep
    /// and what it could not, and writes nothing.
    #[serde(skip_serializing_if = "is_false")]
    pub apply: bool,
}

impl<'a> RepairRequest<'a> {
    /// Repairs the session `session_id` (a plan until [`apply`](Self::apply)).
    pub fn session(session_id: impl Into<Cow<'a, str>>) -> RepairRequest<'a> {
        RepairRequest {
            session_id: Some(session_id.into()),
            ..Default::default()
        }
    }

    /// Repairs the workflow `workflow_id` (a plan until [`apply`](Self::apply)).
    pub fn workflow(workflow_id: impl Into<Cow<'a, str>>) -> RepairRequest<'a> {
        RepairRequest {
            workflow_id: Some(workflow_id.into()),
            ..Default::default()
        }
    }

    /// Whether to write the repair (false: only report).
    pub fn apply(mut self, apply: bool) -> RepairRequest<'a> {
        self.apply = apply;
        self
    }
}

/// The result of `repair`: what it keeps of a damaged log and what it
/// cannot keep.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct RepairReport {
    /// "session" or "workflow".
    pub kind: String,
    pub id: String,
    pub path: String,
    /// The state before the repair ([`session_state`]).
    pub state: String,
    /// Whether the repair was written.
    pub applied: bool,
    /// The generation the repaired session is at (for a workflow, the
    /// number of commits kept); 0 when nothing can be kept and the log is
    /// only moved aside.
    pub generation: u64,
    /// What the repaired log holds of the original.
    pub kept_bytes: u64,
    /// What it cannot hold.
    pub lost_bytes: u64,
    /// What could not be kept and why, one line each.
    #[serde(deserialize_with = "nullable")]
    pub lost: Vec<String>,
    /// For a workflow, the steps the repaired log records as done.
    #[serde(deserialize_with = "nullable", skip_serializing_if = "Vec::is_empty")]
    pub steps: Vec<String>,
    /// Where the original bytes are kept (after apply), or will be.
    pub quarantine: String,
}

/// The params of `importFile`: the absolute path of an envelope (or a
/// bare session) file.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ImportFileRequest<'a> {
    pub path: Cow<'a, str>,
}

/// The single-file JSON form of a session that `export` answers,
/// `exportFile` writes and `import` and `importFile` read: the snapshot's
/// own fields in `session`, its records beside it (artifact data in
/// base64), its loop checkpoints (the latest of each run not yet ended) and
/// the workflow checkpoints it owns, so that after an import into another
/// workspace `resume_run` and a resumable workflow continue where they
/// stopped. Both are left out when empty.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Envelope {
    pub schema_version: i64,
    pub session: Option<Snapshot>,
    #[serde(deserialize_with = "nullable")]
    pub artifacts: Vec<Artifact>,
    #[serde(deserialize_with = "nullable")]
    pub traces: Vec<Trace>,
    #[serde(deserialize_with = "nullable")]
    pub runs: Vec<Run>,
    #[serde(deserialize_with = "nullable")]
    pub verifications: Vec<Verification>,
    #[serde(deserialize_with = "nullable")]
    pub subagent_tasks: Vec<SubagentTask>,
    pub handoff: Option<Handoff>,
    pub runtime: Option<Runtime>,
    #[serde(deserialize_with = "nullable", skip_serializing_if = "Vec::is_empty")]
    pub checkpoints: Vec<LoopCheckpoint>,
    #[serde(deserialize_with = "nullable", skip_serializing_if = "Vec::is_empty")]
    pub workflows: Vec<Workflow>,
}

/// The params of the wire's `hello` (libcairn's `hello` takes none and
/// sends its own).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct HelloParams<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub protocol_version: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub client: Option<Cow<'a, str>>,
}

/// The params of `subscribe` (empty `events`: all).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct SubscribeParams<'a> {
    #[serde(skip_serializing_if = "Vec::is_empty", deserialize_with = "nullable")]
    pub events: Vec<Cow<'a, str>>,
}

/// The result of the wire's `subscribe` and `unsubscribe`: the
/// connection's subscription afterwards.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct SubscribeResult {
    #[serde(deserialize_with = "nullable")]
    pub events: Vec<String>,
}

/// The result of libcairn's `subscribe`: an id for `nextEvent` and
/// `unsubscribe`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LibSubscription {
    pub subscription: u64,
}

/// The params of libcairn's `nextEvent` and `unsubscribe`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NextEventParams {
    pub subscription: u64,
    /// How long `nextEvent` may wait; `None`: the longest (60 s).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<u64>,
}

/// One event of a libcairn subscription, or none when the wait ran out;
/// `closed` once the subscription has ended; `dropped` counts the events
/// lost so far.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct NextEventResult {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub event: Option<Event>,
    pub closed: bool,
    pub dropped: u64,
}

/// The data of `session.committed`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionCommittedData {
    pub session_id: String,
    pub generation: u64,
}

/// The data of `session.deleted`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionDeletedData {
    pub session_id: String,
}

/// The data of `run.checkpointed`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunCheckpointedData {
    pub session_id: String,
    pub run_id: String,
    pub turn: i64,
    pub generation: u64,
}

/// The data of `run.completed`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunCompletedData {
    pub session_id: String,
    pub run_id: String,
    pub status: String,
    pub generation: u64,
}

/// The data of `run.resumed`: `run_id` is the new run.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunResumedData {
    pub session_id: String,
    pub run_id: String,
    pub resumed_from: String,
    pub generation: u64,
}

/// The data of `workflow.step_completed`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorkflowStepCompletedData {
    pub workflow_id: String,
    pub step_id: String,
}

/// The data of `file.changed`: kind is added, modified, deleted or
/// overflow.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileChangedData {
    pub path: String,
    pub kind: String,
}

/// The data of `events.dropped`: how many events were lost.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DroppedData {
    pub dropped: u64,
}

/// The params of `handoff` (and of every method that names one session).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionParams<'a> {
    pub session_id: Cow<'a, str>,
}

/// The params of `handoff`.
pub type HandoffRequest<'a> = SessionParams<'a>;

/// The params of `changes`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct ChangesParams<'a> {
    /// The clock of an earlier answer; `None`: everything (a fresh
    /// instance).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub since: Option<Cow<'a, str>>,
}

/// The params of `runtime_check`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RuntimeCheckRequest<'a> {
    pub session_id: Cow<'a, str>,
    /// Per health check, in milliseconds; `None`: the default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<u64>,
}

/// The params of `runtime_restart`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RuntimeRestartRequest<'a> {
    pub session_id: Cow<'a, str>,
    /// The recorded process's name.
    pub name: Cow<'a, str>,
    /// How long the health check may take to pass after the start, in
    /// milliseconds; `None`: the default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<u64>,
}

// The targeted reads: each costs what it returns, not the session's size,
// and answers from one generation, which it reports.

/// What [`crate::Client::resume_session_with`] includes of the artifacts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum IncludeArtifacts {
    /// Every artifact with its data (the default).
    Full,
    /// Every artifact without its data (`data` is `None`; sha256, size and
    /// metadata describe it).
    Metadata,
    /// No artifacts.
    None,
}

/// What [`crate::Client::resume_session_with`] includes of the traces.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum IncludeTraces {
    /// Every trace (the default).
    All,
    /// No traces.
    None,
}

/// What [`crate::Client::resume_session_with`] includes; `None` (the
/// [`Default`]) leaves each part as [`crate::Client::resume_session`] has
/// it: every message, artifacts in full, every trace, drift and process
/// checks on.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct ResumeOptions {
    /// Only the last N messages (`messages_from` in the result says where
    /// they start; `message_count` is the session's count).
    pub messages_tail: Option<u64>,
    pub artifacts: Option<IncludeArtifacts>,
    pub traces: Option<IncludeTraces>,
    /// `Some(false)`: skip the workspace drift (reported as not tracked),
    /// which costs in proportion to the workspace's file count.
    pub drift: Option<bool>,
    /// `Some(false)`: skip the health checks of the recorded processes
    /// (`processes` is empty).
    pub processes: Option<bool>,
}

/// The params of `resumeSession`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResumeSessionRequest<'a> {
    pub session_id: Cow<'a, str>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub messages_tail: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub artifacts: Option<IncludeArtifacts>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub traces: Option<IncludeTraces>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub drift: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub processes: Option<bool>,
}

impl<'a> ResumeSessionRequest<'a> {
    /// The params of `session_id` resumed with `options`.
    pub fn new(session_id: &'a str, options: &ResumeOptions) -> ResumeSessionRequest<'a> {
        ResumeSessionRequest {
            session_id: session_id.into(),
            messages_tail: options.messages_tail,
            artifacts: options.artifacts,
            traces: options.traces,
            drift: options.drift,
            processes: options.processes,
        }
    }
}

fn is_zero_u64(v: &u64) -> bool {
    *v == 0
}

/// Which messages [`crate::Client::messages`] reads: `[from, to)` by index
/// (`to` 0: to the end), or the last `tail`, or those added after
/// generation `since_generation` (each alone; 0 leaves a field unset).
/// `limit` (items) and `max_bytes` (of message bytes, past the first) cut
/// the page short; a page holds at least one message when the range is not
/// empty, so paging from the page's `next` always advances.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct MessagesQuery {
    pub tail: u64,
    pub from: u64,
    pub to: u64,
    pub since_generation: u64,
    pub limit: u64,
    pub max_bytes: u64,
}

/// The params of `messages`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MessagesRequest<'a> {
    pub session_id: Cow<'a, str>,
    #[serde(default, skip_serializing_if = "is_zero_u64")]
    pub from: u64,
    #[serde(default, skip_serializing_if = "is_zero_u64")]
    pub to: u64,
    #[serde(default, skip_serializing_if = "is_zero_u64")]
    pub tail: u64,
    #[serde(default, skip_serializing_if = "is_zero_u64")]
    pub since_generation: u64,
    #[serde(default, skip_serializing_if = "is_zero_u64")]
    pub limit: u64,
    #[serde(default, skip_serializing_if = "is_zero_u64")]
    pub max_bytes: u64,
}

impl<'a> MessagesRequest<'a> {
    /// The params of `query` over `session_id`.
    pub fn new(session_id: &'a str, query: &MessagesQuery) -> MessagesRequest<'a> {
        MessagesRequest {
            session_id: session_id.into(),
            from: query.from,
            to: query.to,
            tail: query.tail,
            since_generation: query.since_generation,
            limit: query.limit,
            max_bytes: query.max_bytes,
        }
    }
}

/// A page of messages at `generation`: the messages `from..next` of the
/// session's `total`. `more`: the queried range goes on from `next`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct MessagesResult {
    pub session_id: String,
    pub generation: u64,
    pub total: u64,
    pub from: u64,
    pub next: u64,
    pub more: bool,
    #[serde(deserialize_with = "nullable")]
    pub messages: Vec<Value>,
}

/// The params of `artifact`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ArtifactRequest<'a> {
    pub session_id: Cow<'a, str>,
    pub artifact_id: Cow<'a, str>,
}

/// The result of `artifact`: one artifact with its data.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ArtifactResult {
    pub session_id: String,
    pub generation: u64,
    pub artifact: Artifact,
}

/// The result of `artifacts`: every artifact of the session, in order,
/// without data (id, kind, name, media type, run, sha256, size, path and
/// metadata).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ArtifactsResult {
    pub session_id: String,
    pub generation: u64,
    #[serde(deserialize_with = "nullable")]
    pub artifacts: Vec<Artifact>,
}

/// The params of `artifactsByID`: up to 1,024 distinct artifact ids.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ArtifactsByIDRequest<'a> {
    pub session_id: Cow<'a, str>,
    pub artifact_ids: Vec<Cow<'a, str>>,
}

/// The result of `artifactsByID`: the named artifacts the session holds,
/// with their data, in the order named (ids it does not hold are skipped).
/// `next` is how many of the named ids the answer covers: all of them
/// unless the next artifact would have passed the reply size limit; ask
/// again for the ids from there.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ArtifactsByIDResult {
    pub session_id: String,
    pub generation: u64,
    #[serde(deserialize_with = "nullable")]
    pub artifacts: Vec<Artifact>,
    pub next: u64,
}

/// The params of `run`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunRequest<'a> {
    pub run_id: Cow<'a, str>,
    /// When set, must be the session that records the run (else
    /// `not_owner`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<Cow<'a, str>>,
}

/// The result of `run`: one run with its latest loop checkpoint, if it has
/// one, and the run that resumed it, if one did.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct RunResult {
    pub session_id: String,
    pub generation: u64,
    pub run: Run,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub checkpoint: Option<LoopCheckpoint>,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub resumed_as: String,
}

/// The result of `runs`: the session's runs.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct RunsResult {
    pub session_id: String,
    pub generation: u64,
    #[serde(deserialize_with = "nullable")]
    pub runs: Vec<Run>,
}

/// Which of a run's events [`crate::Client::run_events`] reads: from index
/// `from` (or those committed after generation `since_generation`), cut
/// short by `limit` and `max_bytes` as in [`MessagesQuery`].
/// `session_id`, when set, must be the session that records the run.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct RunEventsQuery {
    pub session_id: Option<String>,
    pub from: u64,
    pub since_generation: u64,
    pub limit: u64,
    pub max_bytes: u64,
}

/// The params of `runEvents`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunEventsRequest<'a> {
    pub run_id: Cow<'a, str>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<Cow<'a, str>>,
    #[serde(default, skip_serializing_if = "is_zero_u64")]
    pub from: u64,
    #[serde(default, skip_serializing_if = "is_zero_u64")]
    pub since_generation: u64,
    #[serde(default, skip_serializing_if = "is_zero_u64")]
    pub limit: u64,
    #[serde(default, skip_serializing_if = "is_zero_u64")]
    pub max_bytes: u64,
}

impl<'a> RunEventsRequest<'a> {
    /// The params of `query` over the events of `run_id`.
    pub fn new(run_id: &'a str, query: &'a RunEventsQuery) -> RunEventsRequest<'a> {
        RunEventsRequest {
            run_id: run_id.into(),
            session_id: query.session_id.as_deref().map(Into::into),
            from: query.from,
            since_generation: query.since_generation,
            limit: query.limit,
            max_bytes: query.max_bytes,
        }
    }
}

/// Run event kinds ([`RunEvent::kind`]).
pub mod run_event_kind {
    /// A trace recorded with the run's id (`trace` is set).
    pub const TRACE: &str = "trace";
    /// A loop checkpoint of the run, kept until the run ends
    /// (`checkpoint` is set).
    pub const CHECKPOINT: &str = "checkpoint";
}

/// One event of a run, with the generation that committed it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RunEvent {
    /// One of [`run_event_kind`].
    pub kind: String,
    #[serde(default)]
    pub generation: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace: Option<Trace>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checkpoint: Option<LoopCheckpoint>,
}

/// A page of a run's events (its traces and kept loop checkpoints, in
/// commit order): the events `from..next` of `total`. `more`: query again
/// from `next`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct RunEventsResult {
    pub session_id: String,
    pub run_id: String,
    pub generation: u64,
    pub total: u64,
    pub from: u64,
    pub next: u64,
    pub more: bool,
    #[serde(deserialize_with = "nullable")]
    pub events: Vec<RunEvent>,
}
