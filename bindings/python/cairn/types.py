"""Typed shapes of cairn's results (plain dicts at run time).

Field names are the wire names of the C API (engine/api.go, session/*.go).
Opaque host data (messages, state, step results, metadata values) is any
JSON value; binary artifact ``data`` is base64 text.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, List, Literal, Optional, TypedDict

__all__ = [
    "JSON",
    "Usage",
    "SaveResult",
    "Drift",
    "InterruptedRun",
    "ProcessState",
    "ResumeSessionResult",
    "BeginRunResult",
    "CheckpointResult",
    "CompleteRunResult",
    "ResumeRunResult",
    "StepSpec",
    "StepRecord",
    "BeginWorkflowResult",
    "SessionSummary",
    "ForkResult",
    "ImportResult",
    "Event",
    "Status",
    "HandoffMissing",
    "HandoffResult",
    "PreviewState",
    "RuntimeCheckResult",
    "RuntimeRestartResult",
    "ChangeSet",
    "StepFn",
]

#: Any JSON value (dict, list, str, int, float, bool or None).
JSON = Any

#: A parallel_resumable step function: called with no arguments; its return
#: value (JSON-serializable) is recorded as the step's result.
StepFn = Callable[[], Any]


class Usage(TypedDict, total=False):
    input_tokens: int
    output_tokens: int
    total_tokens: int
    cost: float


class SaveResult(TypedDict):
    generation: int


class _DriftBase(TypedDict):
    tracked: bool
    added: Optional[List[str]]
    modified: Optional[List[str]]
    deleted: Optional[List[str]]


class Drift(_DriftBase, total=False):
    """Files changed; ``reason`` says why they are not tracked, when not."""

    reason: str


#: The live state of a recorded process, from its health check.
ProcessStateName = Literal["not_running", "healthy", "unhealthy", "unknown"]


class _ProcessStateBase(TypedDict):
    name: str
    state: ProcessStateName


class ProcessState(_ProcessStateBase, total=False):
    detail: str


class _InterruptedRunBase(TypedDict):
    run_id: str
    status: str
    turn: int
    message_count: int
    usage: Usage
    tool_calls_count: int
    checkpointed_at: str


class InterruptedRun(_InterruptedRunBase, total=False):
    resumed_as: str


class ResumeSessionResult(TypedDict):
    snapshot: Dict[str, Any]
    generation: int
    drift: Drift
    interrupted_runs: List[InterruptedRun]
    processes: List[ProcessState]


class BeginRunResult(TypedDict):
    run_id: str
    generation: int


class CheckpointResult(TypedDict):
    generation: int
    message_count: int


class CompleteRunResult(TypedDict):
    generation: int


class _ResumeRunBase(TypedDict):
    run_id: str
    resumed_from: str
    session_id: str
    messages: List[JSON]
    turn: int
    usage: Usage
    tool_calls_count: int
    files_touched_after_checkpoint: Optional[List[str]]
    files_tracked: bool


class ResumeRunResult(_ResumeRunBase, total=False):
    state: JSON


class StepSpec(TypedDict):
    step_id: str
    identity: str


class _StepRecordBase(TypedDict):
    step_id: str
    identity: str
    completed_at: str


class StepRecord(_StepRecordBase, total=False):
    result: JSON


class BeginWorkflowResult(TypedDict):
    completed: List[StepRecord]


class _SummaryBase(TypedDict):
    session_id: str
    generation: int
    created_at: str
    updated_at: str
    message_count: int
    checkpoints: int
    size_bytes: int


class SessionSummary(_SummaryBase, total=False):
    runs: Dict[str, int]


class ForkResult(TypedDict):
    session_id: str
    generation: int


class ImportResult(TypedDict):
    session_id: str
    generation: int


class Event(TypedDict):
    """An event: ``event`` is its type (``session.committed``, ...)."""

    event: str
    data: Dict[str, Any]


class _StatusBase(TypedDict):
    mode: str
    version: str
    workspace: str
    pid: int


class Status(_StatusBase, total=False):
    daemon: Dict[str, Any]


class HandoffMissing(TypedDict):
    """One required part a handoff lacks: ``key`` is e.g. ``"next_step"``."""

    key: str
    message: str


class HandoffResult(TypedDict):
    session_id: str
    generation: int
    markdown: str
    complete: bool
    missing: List[HandoffMissing]
    files: Drift


class _PreviewStateBase(TypedDict):
    url: str
    state: ProcessStateName


class PreviewState(_PreviewStateBase, total=False):
    process: str


class RuntimeCheckResult(TypedDict):
    processes: List[ProcessState]
    previews: List[PreviewState]


class _RuntimeRestartBase(TypedDict):
    name: str
    outcome: Literal["started", "already_healthy", "failed"]
    state: ProcessStateName
    took_ms: int


class RuntimeRestartResult(_RuntimeRestartBase, total=False):
    pid: int
    detail: str
    log: str
    missing_env: List[str]
    error: str


class ChangeSet(TypedDict):
    """What changed in the workspace after ``since``; pass ``clock`` as the
    next ``since``. ``fresh_instance``: the tracker cannot tell (a new
    tracker, or an unknown clock), so every file is listed as added."""

    clock: str
    fresh_instance: bool
    added: List[str]
    modified: List[str]
    deleted: List[str]
