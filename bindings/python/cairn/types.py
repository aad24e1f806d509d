"""Typed shapes of cairn's results (plain dicts at run time).

Field names are the wire names of the C API (engine/api.go, session/*.go).
Opaque host data (messages, state, step results, metadata values) is any
JSON value; binary artifact ``data`` is base64 text.
"""

from __future__ import annotations

import sys
from typing import Any, Callable, Dict, List, Optional

if sys.version_info >= (3, 8):
    from typing import TypedDict
else:  # pragma: no cover
    TypedDict = dict

__all__ = [
    "JSON",
    "Usage",
    "SaveResult",
    "Drift",
    "InterruptedRun",
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


class Drift(TypedDict):
    tracked: bool
    added: Optional[List[str]]
    modified: Optional[List[str]]
    deleted: Optional[List[str]]


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
