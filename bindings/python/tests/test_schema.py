"""The binding against the one schema of the wire shapes (api/schema.json).

- Every fixture in api/fixtures/ (one example document per type, every
  optional field filled) is checked against the TypedDict of the same name
  in cairn.types: every key declared, every required key present, and every
  value of its annotated type, recursively.
- Every type in the schema's $defs has that TypedDict, with the same keys,
  the same required keys and agreeing annotations.
- libcairn's answer to every method, in each mode, is of the type the schema
  names for it.
- The sync and the async client expose every method of the schema's table.
"""

from __future__ import annotations

import functools
import inspect
import json
import os
import re
import sys
from pathlib import Path
from typing import Any, Dict, List, Literal, Union, get_args, get_origin, get_type_hints

import pytest

import cairn
import cairn.aio
import cairn.types as types
from conftest import RUNTIME, msg

if sys.version_info < (3, 9):  # pragma: no cover
    pytest.skip("TypedDict.__required_keys__ needs Python 3.9", allow_module_level=True)

API = Path(__file__).resolve().parents[3] / "api"
SCHEMA = API / "schema.json"
FIXTURES = sorted((API / "fixtures").glob("*.json"))


@functools.lru_cache(maxsize=None)
def schema() -> Dict[str, Any]:
    """api/schema.json, read once (callers do not change it)."""
    return json.loads(SCHEMA.read_text(encoding="utf-8"))  # type: ignore[no-any-return]


def is_typeddict(tp: Any) -> bool:
    return isinstance(tp, type) and issubclass(tp, dict) and hasattr(tp, "__required_keys__")


def check(value: Any, tp: Any, path: str) -> List[str]:
    """The ways value is not of the annotated type tp ([] when it is)."""
    if tp is Any:
        return []
    if tp is type(None):
        return [] if value is None else [f"{path}: {value!r} is not null"]
    if is_typeddict(tp):
        if not isinstance(value, dict):
            return [f"{path}: {type(value).__name__} is not an object ({tp.__name__})"]
        hints = get_type_hints(tp)
        errs = [f"{path}.{k}: not declared in {tp.__name__}" for k in value if k not in hints]
        errs += [f"{path}.{k}: required by {tp.__name__}, missing" for k in sorted(tp.__required_keys__) if k not in value]
        for k, v in value.items():
            if k in hints:
                errs += check(v, hints[k], f"{path}.{k}")
        return errs
    origin, args = get_origin(tp), get_args(tp)
    if origin is Union:
        tried = [check(value, a, path) for a in args]
        if any(not e for e in tried):
            return []
        return [f"{path}: {value!r} matches none of {tp}: " + "; ".join(e[0] for e in tried)]
    if origin is Literal:
        return [] if value in args else [f"{path}: {value!r} is not one of {args}"]
    if origin is list:
        if not isinstance(value, list):
            return [f"{path}: {type(value).__name__} is not a list"]
        return [e for i, v in enumerate(value) for e in check(v, args[0] if args else Any, f"{path}[{i}]")]
    if origin is dict:
        if not isinstance(value, dict):
            return [f"{path}: {type(value).__name__} is not an object"]
        vt = args[1] if args else Any
        return [e for k, v in value.items() for e in check(v, vt, f"{path}[{k!r}]")]
    if tp is bool:
        return [] if isinstance(value, bool) else [f"{path}: {value!r} is not a bool"]
    if tp is int:
        return [] if isinstance(value, int) and not isinstance(value, bool) else [f"{path}: {value!r} is not an int"]
    if tp is float:
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
        return [] if ok else [f"{path}: {value!r} is not a number"]
    if tp is str:
        return [] if isinstance(value, str) else [f"{path}: {value!r} is not a string"]
    return [f"{path}: the checker does not know the annotation {tp!r}"]


def test_schema_and_fixtures_exist() -> None:
    assert SCHEMA.is_file(), f"{SCHEMA} is missing"
    assert FIXTURES, f"no fixtures in {API / 'fixtures'}"


@pytest.mark.parametrize("fixture", FIXTURES, ids=[f.stem for f in FIXTURES])
def test_fixture_matches_types(fixture: Path) -> None:
    tp = getattr(types, fixture.stem, None)
    assert is_typeddict(tp), f"cairn.types has no TypedDict {fixture.stem} for {fixture.name}"
    assert fixture.stem in types.__all__, f"{fixture.stem} is not exported by cairn.types"
    doc = json.loads(fixture.read_text(encoding="utf-8"))
    errs = check(doc, tp, fixture.stem)
    assert not errs, "\n".join(errs)


# TypedDicts whose required keys are fewer than the schema's, on purpose.
LOOSER = {
    # A request may leave any count out (zero); answers carry all four.
    "Usage": {"input_tokens", "output_tokens", "total_tokens", "cost"},
}


def agrees(tp: Any, node: Dict[str, Any], path: str) -> List[str]:
    """The ways the annotation tp differs from the schema node ([] when they
    agree)."""
    node = {k: v for k, v in node.items() if k not in ("description", "format", "contentEncoding")}
    if not node:
        return [] if tp is Any else [f"{path}: any JSON value in the schema, annotated {tp}"]
    if "$ref" in node:
        name = node["$ref"].rsplit("/", 1)[1]
        ok = is_typeddict(tp) and tp.__name__ == name
        return [] if ok else [f"{path}: the schema has {name}, annotated {tp}"]
    if "anyOf" in node:
        alts = [a for a in node["anyOf"] if a != {"type": "null"}]
        args = [a for a in get_args(tp) if a is not type(None)] if get_origin(tp) is Union else []
        if len(alts) != 1 or len(alts) == len(node["anyOf"]) or len(args) != 1 or type(None) not in get_args(tp):
            return [f"{path}: the schema has {node['anyOf']}, annotated {tp}"]
        return agrees(args[0], alts[0], path)
    t = node.get("type")
    origin, args = get_origin(tp), get_args(tp)
    if t == "array":
        if origin is not list:
            return [f"{path}: the schema has an array, annotated {tp}"]
        return agrees(args[0], node.get("items", {}), f"{path}[]")
    if t == "object" and "properties" not in node:
        if origin is not dict or args[0] is not str:
            return [f"{path}: the schema has a map, annotated {tp}"]
        return agrees(args[1], node.get("additionalProperties", {}), f"{path}{{}}")
    if t == "string" and "enum" in node:
        ok = origin is Literal and set(args) == set(node["enum"])
        return [] if ok else [f"{path}: the schema has the enum {node['enum']}, annotated {tp}"]
    want = {"string": str, "integer": int, "number": float, "boolean": bool}.get(t)
    if want is None or tp is not want:
        return [f"{path}: the schema has {node}, annotated {tp}"]
    return []


def test_types_match_schema() -> None:
    """Every object type of the schema has a TypedDict of its name in
    cairn.types with the same keys, the same required keys and agreeing
    annotations."""
    defs = schema()["$defs"]
    errs: List[str] = []
    for name, d in sorted(defs.items()):
        tp = getattr(types, name, None)
        if not is_typeddict(tp):
            errs.append(f"{name}: no TypedDict in cairn.types")
            continue
        hints = get_type_hints(tp)
        props = d.get("properties", {})
        if set(hints) != set(props):
            errs.append(f"{name}: keys {sorted(hints)} != the schema's {sorted(props)}")
        required = set(d.get("required", [])) - LOOSER.get(name, set())
        if set(tp.__required_keys__) != required:
            errs.append(f"{name}: required {sorted(tp.__required_keys__)} != the schema's {sorted(required)}")
        for k in sorted(set(hints) & set(props)):
            errs += agrees(hints[k], props[k], f"{name}.{k}")
    assert not errs, "\n".join(errs)


def test_checker_rejects_what_it_should() -> None:
    """The checker itself: an undeclared key, a missing required key, a wrong
    nested type, a bad literal and a null where a list is due all fail."""
    good = {"name": "web", "state": "healthy", "detail": "ok"}
    assert check(good, types.ProcessState, "p") == []
    assert check({**good, "extra": 1}, types.ProcessState, "p")
    assert check({"state": "healthy"}, types.ProcessState, "p")
    assert check({**good, "state": "asleep"}, types.ProcessState, "p")
    assert check({**good, "name": 3}, types.ProcessState, "p")
    rc = {"processes": [good], "previews": []}
    assert check(rc, types.RuntimeCheckResult, "r") == []
    assert check({**rc, "previews": None}, types.RuntimeCheckResult, "r")
    assert check({**rc, "processes": [{**good, "name": None}]}, types.RuntimeCheckResult, "r")
    assert check(True, int, "i") and check(1.5, int, "i") and check(1, float, "f") == []


def snake(name: str) -> str:
    """A wire method name in Python: resumeSession -> resume_session,
    runtime.check -> runtime_check."""
    return re.sub(r"(?<=[a-z0-9])([A-Z])", r"_\1", name).replace(".", "_").lower()


# Wire methods whose Python name is not the plain snake case: list and import
# would shadow a builtin and be a keyword.
RENAMED = {"list": "list_sessions", "import": "import_"}


def test_every_method_is_exposed() -> None:
    names = [m["name"] for m in schema()["methods"]]
    for required in ("handoff", "runtime.check", "runtime.restart", "changes"):
        assert required in names
    missing = []
    for name in names:
        if name == "unsubscribe":
            # Closing the subscription unsubscribes.
            ok = callable(getattr(cairn.Subscription, "close", None)) and callable(
                getattr(cairn.aio.AsyncSubscription, "aclose", None)
            )
            if not ok:
                missing.append(name)
            continue
        py = RENAMED.get(name, snake(name))
        if not callable(getattr(cairn.Client, py, None)):
            missing.append(f"cairn.Client.{py} ({name})")
        am = getattr(cairn.aio.AsyncClient, py, None)
        if not (callable(am) and inspect.iscoroutinefunction(am)):
            missing.append(f"cairn.aio.AsyncClient.{py} ({name})")
    for m in schema()["lib_methods"]:
        # nextEvent: libcairn's own call behind a subscription's iteration.
        assert m["name"] == "nextEvent", f"a libcairn method the test does not know: {m['name']}"
        if not callable(getattr(cairn.Subscription, "next_event", None)):
            missing.append("cairn.Subscription.next_event (nextEvent)")
        if not inspect.iscoroutinefunction(getattr(cairn.aio.AsyncSubscription, "next_event", None)):
            missing.append("cairn.aio.AsyncSubscription.next_event (nextEvent)")
    assert not missing, "methods of api/schema.json not exposed: " + ", ".join(missing)


def test_snake() -> None:
    assert [snake(n) for n in ("resumeSession", "runtime.check", "hello", "beginRun")] == [
        "resume_session",
        "runtime_check",
        "hello",
        "begin_run",
    ]


# An artifact with data and metadata, for the artifact reads.
ART = {"id": "a1", "kind": "file", "data": "aGk=", "metadata": {"lines": 1}}


def calls(ws: str) -> List[Any]:
    """(method, params) for every method of the table and of libcairn's own
    (nextEvent), in an order that makes each succeed."""
    with open(os.path.join(ws, "a.txt"), "w") as f:
        f.write("a")
    return [
        ("subscribe", {"events": ["session.committed"]}),
        ("hello", None),
        ("status", None),
        ("save", {"session_id": "s", "change": {"append_messages": [msg(0)], "runtime": RUNTIME, "append_artifacts": [ART]}}),
        ("resumeSession", {"session_id": "s"}),
        ("summary", {"session_id": "s"}),
        ("messages", {"session_id": "s", "tail": 1}),
        ("artifact", {"session_id": "s", "artifact_id": ART["id"]}),
        ("artifacts", {"session_id": "s"}),
        ("artifactsByID", {"session_id": "s", "artifact_ids": ["nope", ART["id"]]}),
        ("beginRun", {"session_id": "s", "run_id": "r"}),
        ("checkpoint", {"run_id": "r", "turn": 1, "new_messages": [msg(1)], "usage": {"total_tokens": 3}, "tool_calls_count": 1, "state": {"k": 1}}),
        ("resumeRun", {"run_id": "r", "new_run_id": "r2"}),
        ("run", {"run_id": "r", "session_id": "s"}),
        ("runs", {"session_id": "s"}),
        ("runEvents", {"run_id": "r"}),
        ("completeRun", {"run_id": "r2", "status": "completed"}),
        ("beginWorkflow", {"workflow_id": "w", "session_id": "s", "steps": [{"step_id": "a", "identity": "i"}]}),
        ("completeStep", {"workflow_id": "w", "step_id": "a", "identity": "i", "result": [1]}),
        ("finishWorkflow", {"workflow_id": "w"}),
        ("list", None),
        ("fork", {"session_id": "s", "new_id": "f"}),
        ("export", {"session_id": "f"}),
        ("delete", {"session_id": "f"}),
        ("import", None),  # the envelope export answered
        ("exportFile", {"session_id": "f", "path": os.path.join(ws, "f.json")}),
        ("delete", {"session_id": "f"}),
        ("importFile", {"path": os.path.join(ws, "f.json")}),
        ("changes", {}),
        ("verify", None),
        # A healthy session has nothing to repair (invalid_argument);
        # test_damage.py checks the RepairReport of a damaged one.
        ("repair", {"session_id": "s"}),
        ("handoff", {"session_id": "s"}),
        ("runtime.check", {"session_id": "s"}),
        ("runtime.restart", {"session_id": "s", "name": "broken", "timeout_ms": 5000}),
        ("nextEvent", None),  # the subscription subscribe answered
        ("unsubscribe", None),
    ]


def test_answers_match_types(client: cairn.Client, workspace: str) -> None:
    """libcairn's answer to every method, in this mode, is of the type the
    schema names for it (lib_result, else result), lists never null."""
    table = {m["name"]: m for m in schema()["methods"] + schema()["lib_methods"]}
    todo = calls(workspace)
    assert {m for m, _ in todo} == set(table)
    envelope = sub = None
    for name, params in todo:
        if name == "import":
            params = {"envelope": envelope}
        elif name in ("nextEvent", "unsubscribe"):
            params = {"subscription": sub, "timeout_ms": 1000}
        if name == "repair":
            with pytest.raises(cairn.InvalidArgumentError):
                client.call(name, params)
            continue
        answer = client.call(name, params)
        if name == "export":
            envelope = answer["envelope"]
        elif name == "subscribe":
            sub = answer["subscription"]
        elif name == "nextEvent":
            assert answer["event"]["event"] == "session.committed"
        tname = table[name].get("lib_result") or table[name]["result"]
        errs = check(answer, getattr(types, tname), f"{name}:{tname}")
        assert not errs, "\n".join(errs)
