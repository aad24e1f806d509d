"""Typed shapes of cairn's requests, results and events (plain dicts at run time).

Each TypedDict is named and shaped as the type of the same name in
api/schema.json (the Go types of packages ``api`` and ``session``); field
names are the wire names of the C API, and tests/test_schema.py checks every
fixture of api/fixtures/ against these. A key is required unless the Go
field is ``omitempty``; such keys sit in a ``total=False`` subclass of a
``_...Base``. Opaque host data (messages, state, step results, metadata
values, trace data) is any JSON value; binary artifact ``data`` is base64
text; times are RFC 3339 text.
"""

# No "from __future__ import annotations": TypedDict would turn every string
# annotation into a ForwardRef, compiling each one at import. A type is
# therefore defined before the types that use it.

from typing import Any, Callable, Dict, List, Literal, Optional, TypedDict

__all__ = [
    "JSON",
    "StepFn",
    "RunStatus",
    "CheckStatus",
    "ProcessStateName",
    # session objects
    "Snapshot",
    "Workspace",
    "Artifact",
    "Trace",
    "Usage",
    "Run",
    "Verification",
    "Check",
    "SubagentTask",
    "Handoff",
    "Restart",
    "ReviewedVersion",
    "NextStep",
    "Runtime",
    "Process",
    "HealthCheck",
    "Preview",
    "ManifestRef",
    "LoopCheckpoint",
    "StepRecord",
    "Workflow",
    "Summary",
    "Change",
    "RunEvent",
    "Capabilities",
    # sessions
    "Empty",
    "SessionParams",
    "SaveRequest",
    "SaveResult",
    "Drift",
    "InterruptedRun",
    "ResumeSessionRequest",
    "ResumeSessionResult",
    # targeted reads
    "MessagesRequest",
    "MessagesResult",
    "ArtifactRequest",
    "ArtifactResult",
    "ArtifactData",
    "ArtifactDataResult",
    "ArtifactsResult",
    "ArtifactsByIDRequest",
    "ArtifactsByIDResult",
    "ArtifactsByIDDataResult",
    "RunRequest",
    "RunResult",
    "RunsResult",
    "RunEventsRequest",
    "RunEventsResult",
    "ListResult",
    "ForkRequest",
    "ForkResult",
    "ExportResult",
    "ExportFileRequest",
    "ExportFileResult",
    "ImportFileRequest",
    "ImportParams",
    "ImportResult",
    "Envelope",
    # verify and repair
    "Problem",
    "VerifyReport",
    "VerifyRequest",
    "SecretScan",
    "SecretFinding",
    "RepairRequest",
    "RepairReport",
    # runs and workflows
    "BeginRunRequest",
    "BeginRunResult",
    "CheckpointRequest",
    "CheckpointResult",
    "CompleteRunRequest",
    "CompleteRunResult",
    "ResumeRunRequest",
    "ResumeRunResult",
    "StepSpec",
    "BeginWorkflowRequest",
    "BeginWorkflowResult",
    "CompleteStepRequest",
    "WorkflowParams",
    # workspace, handoff, runtime
    "ChangesParams",
    "ChangeSet",
    "FilesStatus",
    "HandoffRequest",
    "HandoffMissing",
    "HandoffResult",
    "RuntimeCheckRequest",
    "ProcessState",
    "PreviewState",
    "RuntimeCheckResult",
    "RuntimeRestartRequest",
    "RestartResult",
    # daemon
    "HelloParams",
    "HelloResult",
    "HelloCapabilities",
    "Limits",
    "StatusResult",
    "LibStatus",
    "SubscribeParams",
    "SubscribeResult",
    "LibSubscription",
    "NextEventParams",
    "NextEventResult",
    # events
    "Event",
    "SessionCommittedData",
    "SessionDeletedData",
    "RunCheckpointedData",
    "RunCompletedData",
    "RunResumedData",
    "WorkflowStepCompletedData",
    "FileChangedData",
    "DroppedData",
    # earlier names, kept for callers that used them
    "SessionSummary",
    "Status",
]

#: Any JSON value (dict, list, str, int, float, bool or None).
JSON = Any

#: A parallel_resumable step function: called with no arguments; its return
#: value (JSON-serializable) is recorded as the step's result.
StepFn = Callable[[], Any]

#: The status of a run.
RunStatus = Literal["running", "completed", "interrupted", "failed"]

#: The status of a verification check.
CheckStatus = Literal["passed", "failed", "skipped", "not_run"]

#: The live state of a recorded process, from its health check.
ProcessStateName = Literal["not_running", "healthy", "unhealthy", "unknown"]

# -- session objects (package session) -------------------------------------


class Workspace(TypedDict, total=False):
    root: str
    git_head: str
    git_branch: str
    git_dirty: bool


class _ArtifactBase(TypedDict):
    id: str


class Artifact(_ArtifactBase, total=False):
    kind: str
    name: str
    media_type: str
    run_id: str
    sha256: str
    size: int
    data: str  # base64; a request may pass bytes
    path: str
    metadata: JSON  # free-form, kept byte for byte


class _TraceBase(TypedDict):
    seq: int
    time: str
    type: str


class Trace(_TraceBase, total=False):
    run_id: str
    data: JSON


class Usage(TypedDict, total=False):
    """Token counts and cost. Answers carry every key; a request may leave
    any out (zero)."""

    input_tokens: int
    output_tokens: int
    total_tokens: int
    cost: float


class _RunBase(TypedDict):
    run_id: str
    status: RunStatus
    started_at: str
    usage: Usage
    tool_calls_count: int


class Run(_RunBase, total=False):
    parent_run_id: str
    ended_at: Optional[str]


class _CheckBase(TypedDict):
    name: str
    status: CheckStatus


class Check(_CheckBase, total=False):
    """One verification check with the exact command that ran."""

    command: str
    output: str


class _VerificationBase(TypedDict):
    id: str
    checks: List[Check]


class Verification(_VerificationBase, total=False):
    run_id: str
    summary: str


class _SubagentTaskBase(TypedDict):
    task_id: str


class SubagentTask(_SubagentTaskBase, total=False):
    agent: str
    status: str
    brief: str
    result: JSON
    session_id: str


class Restart(TypedDict, total=False):
    """How to bring the work's processes back (config: keys or files, never values)."""

    workdir: str
    commands: List[str]
    config: List[str]
    health_check: str


class ReviewedVersion(TypedDict, total=False):
    vcs: str
    commit: str
    diff_sha256: str


class NextStep(TypedDict):
    task: str
    done_when: str


class Handoff(TypedDict, total=False):
    done: List[str]
    in_progress: List[str]
    verified: List[str]
    unverified: List[str]
    restart: Optional[Restart]
    reviewed_version: Optional[ReviewedVersion]
    risks: List[str]
    decisions_pending: List[str]
    next_step: Optional[NextStep]


class HealthCheck(TypedDict, total=False):
    """A command with an expected exit code, or a loopback HTTP URL with an
    expected status."""

    command: List[str]
    expect_exit: int
    url: str
    expect_status: int


class _ProcessBase(TypedDict):
    name: str
    command: List[str]


class Process(_ProcessBase, total=False):
    """A recorded process; only environment variable names are kept."""

    cwd: str
    env_keys: List[str]
    port: int
    health_check: Optional[HealthCheck]


class _PreviewBase(TypedDict):
    url: str


class Preview(_PreviewBase, total=False):
    process: str


class Runtime(TypedDict, total=False):
    processes: List[Process]
    previews: List[Preview]


class ManifestRef(TypedDict, total=False):
    id: str
    clock: str
    entries: int
    inexact: bool


class _SnapshotBase(TypedDict):
    schema_version: int
    session_id: str
    generation: int
    created_at: str
    updated_at: str
    messages: List[JSON]


class Snapshot(_SnapshotBase, total=False):
    workspace: Optional[Workspace]
    agent: Dict[str, JSON]
    metadata: Dict[str, JSON]
    artifacts: List[Artifact]
    traces: List[Trace]
    runs: List[Run]
    verifications: List[Verification]
    subagent_tasks: List[SubagentTask]
    handoff: Optional[Handoff]
    runtime: Optional[Runtime]
    files: Optional[ManifestRef]


class _LoopCheckpointBase(TypedDict):
    run_id: str
    session_id: str
    turn: int
    message_count: int
    usage: Usage
    tool_calls_count: int
    created_at: str


class LoopCheckpoint(_LoopCheckpointBase, total=False):
    state: JSON
    files: Optional[ManifestRef]


class Change(TypedDict, total=False):
    """A delta save: every key is optional."""

    schema_version: int
    replace: Optional[Snapshot]
    workspace: Optional[Workspace]
    agent: Dict[str, JSON]
    metadata: Dict[str, JSON]
    append_messages: List[JSON]
    append_traces: List[Trace]
    append_artifacts: List[Artifact]
    upsert_runs: List[Run]
    upsert_verifications: List[Verification]
    upsert_subagent_tasks: List[SubagentTask]
    handoff: Optional[Handoff]
    runtime: Optional[Runtime]
    files: Optional[ManifestRef]
    checkpoint: Optional[LoopCheckpoint]
    drop_checkpoints: List[str]
    # Applied in this order: truncate_messages, then append_messages (so
    # truncate to i plus append replaces the messages from i on);
    # delete_artifacts, then append_artifacts (an id the session holds is a
    # conflict), then put_artifacts (upsert).
    truncate_messages: Optional[int]
    delete_artifacts: List[str]
    put_artifacts: List[Artifact]


class _RunEventBase(TypedDict):
    kind: Literal["trace", "checkpoint"]
    generation: int


class RunEvent(_RunEventBase, total=False):
    """One event of a run: a trace or a loop checkpoint (as ``kind``
    says), with the generation that committed it."""

    trace: Optional[Trace]
    checkpoint: Optional[LoopCheckpoint]


class _StepRecordBase(TypedDict):
    step_id: str
    identity: str
    completed_at: str


class StepRecord(_StepRecordBase, total=False):
    result: JSON


class _WorkflowBase(TypedDict):
    schema_version: int
    workflow_id: str
    steps: List[StepRecord]


class Workflow(_WorkflowBase, total=False):
    """A resumable workflow's checkpoint, as an export carries it."""

    session_id: str


class _SummaryBase(TypedDict):
    session_id: str
    generation: int
    created_at: str
    updated_at: str
    message_count: int
    artifact_count: int
    trace_count: int
    checkpoints: int
    size_bytes: int
    live_bytes: int


class Summary(_SummaryBase, total=False):
    runs: Dict[str, int]  # count by status
    #: Absent for a session the store serves; otherwise why it serves none
    #: of its data: "corrupt", "schema_unsupported" or "unreadable".
    state: str
    #: The error every call on a damaged session answers.
    problem: str


class Capabilities(TypedDict):
    atomic_generations: bool
    delta_commits: bool
    compare_and_swap: bool
    cross_process_lock: bool
    durable: bool
    history: bool


# -- sessions ---------------------------------------------------------------


class Empty(TypedDict):
    """The params or result of a method that has none."""


class SessionParams(TypedDict):
    session_id: str


class _SaveRequestBase(TypedDict):
    session_id: str


class SaveRequest(_SaveRequestBase, total=False):
    snapshot: Optional[Snapshot]
    change: Optional[Change]
    expect_generation: Optional[int]


class SaveResult(TypedDict):
    generation: int


class _DriftBase(TypedDict):
    tracked: bool
    added: List[str]
    modified: List[str]
    deleted: List[str]


class Drift(_DriftBase, total=False):
    """Files changed; ``reason`` says why they are not tracked, when not."""

    reason: str


class _InterruptedRunBase(TypedDict):
    run_id: str
    status: Literal["running", "interrupted"]
    turn: int
    message_count: int
    usage: Usage
    tool_calls_count: int
    checkpointed_at: str


class InterruptedRun(_InterruptedRunBase, total=False):
    resumed_as: str


class _ProcessStateBase(TypedDict):
    name: str
    state: ProcessStateName


class ProcessState(_ProcessStateBase, total=False):
    detail: str


class _ResumeSessionRequestBase(TypedDict):
    session_id: str


class ResumeSessionRequest(_ResumeSessionRequestBase, total=False):
    """What resumeSession includes: the last ``messages_tail`` messages
    (None: all), artifacts in ``"full"``, as ``"metadata"`` or ``"none"``,
    traces ``"all"`` or ``"none"``, workspace drift and process checks (None:
    on)."""

    messages_tail: Optional[int]
    artifacts: Literal["full", "metadata", "none"]
    traces: Literal["all", "none"]
    drift: Optional[bool]
    processes: Optional[bool]


class ResumeSessionResult(TypedDict):
    """``snapshot.messages`` are the messages ``messages_from`` on of the
    session's ``message_count``."""

    snapshot: Optional[Snapshot]
    generation: int
    message_count: int
    messages_from: int
    drift: Drift
    interrupted_runs: List[InterruptedRun]
    processes: List[ProcessState]


# -- targeted reads -----------------------------------------------------------


class _MessagesRequestBase(TypedDict):
    session_id: str


# "from" is a Python keyword, so the types that carry it are declared the
# functional way.
_MessagesRange = TypedDict(
    "_MessagesRange",
    {"from": int, "to": int, "tail": int, "since_generation": int, "limit": int, "max_bytes": int},
    total=False,
)


class MessagesRequest(_MessagesRequestBase, _MessagesRange):
    """``[from, to)`` by index (``to`` 0: to the end), or the last ``tail``,
    or those added after ``since_generation``; ``limit`` and ``max_bytes``
    cut the page short (never below one message)."""


#: A page: the messages ``from`` .. ``next - 1`` of the session's ``total``
#: at ``generation``; ``more``: the queried range goes on from ``next``.
MessagesResult = TypedDict(
    "MessagesResult",
    {
        "session_id": str,
        "generation": int,
        "total": int,
        "from": int,
        "next": int,
        "more": bool,
        "messages": List[JSON],
    },
)


class ArtifactRequest(TypedDict):
    session_id: str
    artifact_id: str


class ArtifactResult(TypedDict):
    """One artifact with its data (base64 on the wire)."""

    session_id: str
    generation: int
    artifact: Artifact


class _ArtifactDataBase(TypedDict):
    id: str
    data: bytes


class ArtifactData(_ArtifactDataBase, total=False):
    """An :class:`Artifact` as :meth:`cairn.Client.artifact` returns it:
    ``data`` decoded to bytes (empty when the artifact has none)."""

    kind: str
    name: str
    media_type: str
    run_id: str
    sha256: str
    size: int
    path: str
    metadata: JSON


class ArtifactDataResult(TypedDict):
    """:class:`ArtifactResult` with the artifact's data decoded."""

    session_id: str
    generation: int
    artifact: ArtifactData


class ArtifactsResult(TypedDict):
    """A session's artifacts without their data."""

    session_id: str
    generation: int
    artifacts: List[Artifact]


class ArtifactsByIDRequest(TypedDict):
    """Up to 1,024 distinct artifact ids of a session, read with their data."""

    session_id: str
    artifact_ids: List[str]


class ArtifactsByIDResult(TypedDict):
    """The named artifacts the session holds, with their data (base64 on
    the wire), in the order named; missing ids are skipped. ``next`` is how
    many of the named ids the answer covers."""

    session_id: str
    generation: int
    artifacts: List[Artifact]
    next: int


class ArtifactsByIDDataResult(TypedDict):
    """:class:`ArtifactsByIDResult` with the artifacts' data decoded."""

    session_id: str
    generation: int
    artifacts: List[ArtifactData]
    next: int


class _RunRequestBase(TypedDict):
    run_id: str


class RunRequest(_RunRequestBase, total=False):
    session_id: str


class _RunResultBase(TypedDict):
    session_id: str
    generation: int
    run: Run


class RunResult(_RunResultBase, total=False):
    """One run with its latest loop checkpoint, when it has one;
    ``resumed_as`` names the run that resumed it, if one did."""

    checkpoint: Optional[LoopCheckpoint]
    resumed_as: str


class RunsResult(TypedDict):
    session_id: str
    generation: int
    runs: List[Run]


class _RunEventsRequestBase(TypedDict):
    run_id: str


_RunEventsRange = TypedDict(
    "_RunEventsRange",
    {"session_id": str, "from": int, "since_generation": int, "limit": int, "max_bytes": int},
    total=False,
)


class RunEventsRequest(_RunEventsRequestBase, _RunEventsRange):
    """A page of a run's events from index ``from`` (or those committed
    after ``since_generation``), cut short by ``limit`` and ``max_bytes``."""


#: A page of a run's events (its traces and kept loop checkpoints, in commit
#: order): ``from`` .. ``next - 1`` of ``total``; ``more``: there are more.
RunEventsResult = TypedDict(
    "RunEventsResult",
    {
        "session_id": str,
        "run_id": str,
        "generation": int,
        "total": int,
        "from": int,
        "next": int,
        "more": bool,
        "events": List[RunEvent],
    },
)


class ListResult(TypedDict):
    sessions: List[Summary]


class _ForkRequestBase(TypedDict):
    session_id: str
    new_id: str


class ForkRequest(_ForkRequestBase, total=False):
    at_generation: int


class ForkResult(TypedDict):
    session_id: str
    generation: int


class _EnvelopeBase(TypedDict):
    schema_version: int
    session: Optional[Snapshot]
    artifacts: List[Artifact]
    traces: List[Trace]
    runs: List[Run]
    verifications: List[Verification]
    subagent_tasks: List[SubagentTask]
    handoff: Optional[Handoff]
    runtime: Optional[Runtime]


class Envelope(_EnvelopeBase, total=False):
    """The single-file JSON form of a session that export writes, with its
    loop checkpoints and the workflows it owns (left out when empty)."""

    checkpoints: List[LoopCheckpoint]
    workflows: List[Workflow]


class ExportResult(TypedDict):
    envelope: Envelope


class ExportFileRequest(TypedDict):
    session_id: str
    path: str


class ExportFileResult(TypedDict):
    """The file export wrote (``path``), its size and the generation it holds."""

    path: str
    bytes: int
    generation: int


class ImportFileRequest(TypedDict):
    path: str


class ImportParams(TypedDict):
    envelope: Envelope  # import_ also takes a bare Snapshot


class ImportResult(TypedDict):
    session_id: str
    generation: int


# -- verify and repair --------------------------------------------------------


class Problem(TypedDict):
    """One file ``verify`` found that is not served, or does not check."""

    kind: str  # "session", "workflow" or "manifest"
    id: str  # the session or workflow id ("" when unknown)
    path: str
    state: str  # "corrupt", "schema_unsupported" or "unreadable"
    offset: int  # where the intact data ends (-1 when unknown)
    size: int  # the file's size
    generation: int  # the last generation that reads back intact
    message: str


class VerifyRequest(TypedDict, total=False):
    """The params of ``verify``: ``secrets`` also scans session content for
    credential-shaped strings."""

    secrets: bool


class _SecretFindingBase(TypedDict):
    session_id: str
    where: str  # "message", "trace", "artifact", "artifact_metadata", "agent" or "metadata"
    index: int  # the message's or trace's index (-1 otherwise)
    offset: int  # where it starts, in bytes, in that item
    rule: str  # the credential format, or "secret_key_name"
    redacted: str  # at most its first 4 characters and "…", never the secret


class SecretFinding(_SecretFindingBase, total=False):
    """One credential-shaped string ``verify`` with ``secrets`` found."""

    id: str  # the artifact's id, or the agent or metadata key


class SecretScan(TypedDict):
    """What ``verify`` with ``secrets`` scanned and found (content is never
    changed). ``found`` counts every finding; ``findings`` lists the first
    1000."""

    sessions: int
    messages: int
    artifacts: int
    traces: int
    bytes: int
    found: int
    findings: List[SecretFinding]


class _VerifyReportBase(TypedDict):
    ok: bool
    sessions: int
    workflows: int
    manifests: int
    bytes: int
    problems: List[Problem]
    quarantine: List[str]


class VerifyReport(_VerifyReportBase, total=False):
    """What ``verify`` checked (logs, manifests, bytes) and found; ``ok``
    when there are no problems. ``quarantine`` lists the files kept aside
    (damaged logs a repair moved, trimmed torn tails): kept, not problems.
    ``secrets`` is there when asked for; its findings are not problems."""

    secrets: Optional[SecretScan]


class RepairRequest(TypedDict, total=False):
    """One of ``session_id`` and ``workflow_id``; ``apply`` writes the
    repair (without it nothing is written)."""

    session_id: str
    workflow_id: str
    apply: bool


class _RepairReportBase(TypedDict):
    kind: str  # "session" or "workflow"
    id: str
    path: str
    state: str  # the state before the repair
    applied: bool
    generation: int  # the generation kept (a workflow: the commits kept)
    kept_bytes: int
    lost_bytes: int
    lost: List[str]  # what could not be kept and why, one line each
    quarantine: str  # where the original bytes are kept (after apply), or will be


class RepairReport(_RepairReportBase, total=False):
    """What ``repair`` keeps of a damaged log and what it cannot keep."""

    steps: List[str]  # a workflow's steps the repaired log records as done


# -- runs and workflows -----------------------------------------------------


class _BeginRunRequestBase(TypedDict):
    session_id: str


class BeginRunRequest(_BeginRunRequestBase, total=False):
    run_id: str


class BeginRunResult(TypedDict):
    run_id: str
    generation: int


class _CheckpointRequestBase(TypedDict):
    run_id: str
    turn: int
    new_messages: List[JSON]
    usage: Usage
    tool_calls_count: int


class CheckpointRequest(_CheckpointRequestBase, total=False):
    session_id: str
    state: JSON


class CheckpointResult(TypedDict):
    generation: int
    message_count: int


class _CompleteRunRequestBase(TypedDict):
    run_id: str
    status: Literal["completed", "interrupted", "failed"]


class CompleteRunRequest(_CompleteRunRequestBase, total=False):
    session_id: str
    usage: Optional[Usage]
    tool_calls_count: Optional[int]


class CompleteRunResult(TypedDict):
    generation: int


class _ResumeRunRequestBase(TypedDict):
    run_id: str


class ResumeRunRequest(_ResumeRunRequestBase, total=False):
    session_id: str
    new_run_id: str
    takeover: bool


class _ResumeRunResultBase(TypedDict):
    run_id: str
    resumed_from: str
    session_id: str
    messages: List[JSON]
    turn: int
    usage: Usage
    tool_calls_count: int
    files_touched_after_checkpoint: List[str]
    files_tracked: bool


class ResumeRunResult(_ResumeRunResultBase, total=False):
    state: JSON


class StepSpec(TypedDict):
    step_id: str
    identity: str


class _BeginWorkflowRequestBase(TypedDict):
    workflow_id: str
    steps: List[StepSpec]


class BeginWorkflowRequest(_BeginWorkflowRequestBase, total=False):
    session_id: str
    takeover: bool


class BeginWorkflowResult(TypedDict):
    completed: List[StepRecord]


class _CompleteStepRequestBase(TypedDict):
    workflow_id: str
    step_id: str
    identity: str


class CompleteStepRequest(_CompleteStepRequestBase, total=False):
    session_id: str
    result: JSON


class WorkflowParams(TypedDict):
    workflow_id: str


# -- workspace, handoff, runtime -------------------------------------------


class ChangesParams(TypedDict, total=False):
    since: str


class ChangeSet(TypedDict):
    """What changed in the workspace after ``since``; pass ``clock`` as the
    next ``since``. ``fresh_instance``: the tracker cannot tell (a new
    tracker, or an unknown clock), so every file is listed as added."""

    clock: str
    fresh_instance: bool
    added: List[str]
    modified: List[str]
    deleted: List[str]


class _FilesStatusBase(TypedDict):
    root: str
    mode: Literal["watching", "polling"]
    clock: str
    files: int
    dirs: int
    watches: int
    events: int
    rescans: int
    overflows: int


class FilesStatus(_FilesStatusBase, total=False):
    warning: str


class HandoffRequest(TypedDict):
    session_id: str


class HandoffMissing(TypedDict):
    """One required part a handoff lacks: ``key`` is e.g. ``"next_step"``."""

    key: Literal["result", "verification", "restart_path", "reviewed_version", "risks_decisions", "next_step"]
    message: str


class HandoffResult(TypedDict):
    session_id: str
    generation: int
    markdown: str
    complete: bool
    missing: List[HandoffMissing]
    files: Drift


class _RuntimeCheckRequestBase(TypedDict):
    session_id: str


class RuntimeCheckRequest(_RuntimeCheckRequestBase, total=False):
    timeout_ms: int


class _PreviewStateBase(TypedDict):
    url: str
    state: ProcessStateName


class PreviewState(_PreviewStateBase, total=False):
    process: str


class RuntimeCheckResult(TypedDict):
    processes: List[ProcessState]
    previews: List[PreviewState]


class _RuntimeRestartRequestBase(TypedDict):
    session_id: str
    name: str


class RuntimeRestartRequest(_RuntimeRestartRequestBase, total=False):
    timeout_ms: int


class _RestartResultBase(TypedDict):
    name: str
    outcome: Literal["started", "already_healthy", "failed"]
    state: ProcessStateName
    took_ms: int


class RestartResult(_RestartResultBase, total=False):
    pid: int
    detail: str
    log: str
    missing_env: List[str]
    error: str


# -- daemon -----------------------------------------------------------------


class HelloParams(TypedDict, total=False):
    protocol_version: int
    client: str


class HelloCapabilities(TypedDict):
    store: Capabilities
    methods: List[str]
    events: List[str]


class Limits(TypedDict):
    max_message_size: int
    max_nested_levels: int
    max_array_elements: int
    max_map_pairs: int
    max_in_flight_per_conn: int
    event_queue_len: int


class HelloResult(TypedDict):
    server_version: str
    protocol_version: int
    workspace: str
    pid: int
    capabilities: HelloCapabilities
    limits: Limits


class _StatusResultBase(TypedDict):
    server_version: str
    protocol_version: int
    workspace: str
    socket: str
    pid: int
    started_at: str
    uptime_ms: int
    connections: int
    subscribers: int
    in_flight: int
    requests: int
    events_dropped: int
    state: Literal["serving", "stopping"]


class StatusResult(_StatusResultBase, total=False):
    """The daemon's status; ``files`` when it tracks the workspace."""

    files: Optional[FilesStatus]


class _LibStatusBase(TypedDict):
    mode: Literal["embedded", "daemon"]
    version: str
    workspace: str
    pid: int


class LibStatus(_LibStatusBase, total=False):
    """libcairn's status: ``daemon`` (daemon mode) is the daemon's."""

    daemon: Optional[StatusResult]


class SubscribeParams(TypedDict, total=False):
    events: List[str]


class SubscribeResult(TypedDict):
    events: List[str]


# -- events -----------------------------------------------------------------


class Event(TypedDict):
    """An event: ``event`` is its type (``session.committed``, ...) and
    ``data`` the matching ``...Data`` shape."""

    event: str
    data: Dict[str, JSON]


class SessionCommittedData(TypedDict):
    session_id: str
    generation: int


class SessionDeletedData(TypedDict):
    session_id: str


class RunCheckpointedData(TypedDict):
    session_id: str
    run_id: str
    turn: int
    generation: int


class RunCompletedData(TypedDict):
    session_id: str
    run_id: str
    status: str
    generation: int


class RunResumedData(TypedDict):
    session_id: str
    run_id: str
    resumed_from: str
    generation: int


class WorkflowStepCompletedData(TypedDict):
    workflow_id: str
    step_id: str


class FileChangedData(TypedDict):
    path: str
    kind: Literal["added", "modified", "deleted", "overflow"]


class DroppedData(TypedDict):
    dropped: int


# -- libcairn's own subscription calls ------------------------------------------


class LibSubscription(TypedDict):
    """libcairn's answer to subscribe: the subscription's id."""

    subscription: int


class _NextEventParamsBase(TypedDict):
    subscription: int


class NextEventParams(_NextEventParamsBase, total=False):
    """The params of nextEvent and, through libcairn, of unsubscribe."""

    timeout_ms: int


class _NextEventResultBase(TypedDict):
    closed: bool
    dropped: int


class NextEventResult(_NextEventResultBase, total=False):
    event: Optional[Event]


# -- earlier names ------------------------------------------------------------

#: The earlier name of :class:`Summary`.
SessionSummary = Summary
#: The earlier name of :class:`LibStatus`.
Status = LibStatus
