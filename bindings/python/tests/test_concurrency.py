"""Concurrent calls from threads, and parallel_resumable."""

from __future__ import annotations

import threading
from collections import Counter
from typing import Any, Callable, Dict, List

import pytest

import cairn
from conftest import msg

THREADS = 8
SAVES = 50


def test_threads_saving(client: cairn.Client) -> None:
    """8 threads × 50 saves: each to its own session, plus one shared session
    where compare-and-swap must hand out every generation exactly once."""
    errors: List[BaseException] = []
    results: Dict[int, List[int]] = {}
    shared: List[int] = []
    lock = threading.Lock()
    start = threading.Barrier(THREADS)

    def worker(t: int) -> None:
        try:
            start.wait(timeout=30)
            gens = []
            for i in range(SAVES):
                r = client.save(f"t{t}", change={"append_messages": [{"t": t, "i": i}]})
                gens.append(r["generation"])
            results[t] = gens
            for _ in range(5):
                while True:
                    g = client.resume_session("shared")["generation"] if client_has("shared") else 0
                    try:
                        r = client.save("shared", change={"append_messages": [t]}, expect_generation=g)
                    except cairn.ConflictError:
                        continue
                    assert r["generation"] == g + 1, (g, r["generation"])
                    with lock:
                        shared.append(r["generation"])
                    break
        except BaseException as e:  # pragma: no cover - reported below
            errors.append(e)

    def client_has(sid: str) -> bool:
        try:
            client.resume_session(sid)
            return True
        except cairn.NotFoundError:
            return False

    threads = [threading.Thread(target=worker, args=(t,)) for t in range(THREADS)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(timeout=60)
        assert not th.is_alive()
    assert not errors, errors
    for t in range(THREADS):
        assert results[t] == list(range(1, SAVES + 1))
        snap = client.resume_session(f"t{t}")["snapshot"]
        assert snap["messages"] == [{"t": t, "i": i} for i in range(SAVES)]
    assert sorted(shared) == list(range(1, THREADS * 5 + 1))
    assert len(client.resume_session("shared")["snapshot"]["messages"]) == THREADS * 5


def test_threads_with_errors_keep_their_own_error(embedded: cairn.Client) -> None:
    """Errors are per call: concurrent failing and succeeding calls never mix up."""
    embedded.save("ok", change={"append_messages": [msg(0)]})
    bad: List[Any] = []
    good: List[Any] = []

    def worker(t: int) -> None:
        for i in range(50):
            if (t + i) % 2:
                try:
                    embedded.resume_session(f"missing-{t}-{i}")
                except cairn.NotFoundError as e:
                    bad.append(f"missing-{t}-{i}" in e.message)
            else:
                good.append(embedded.resume_session("ok")["generation"])

    threads = [threading.Thread(target=worker, args=(t,)) for t in range(THREADS)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(timeout=60)
    assert len(bad) == len(good) == THREADS * 25
    assert all(bad) and set(good) == {1}


class Counted:
    """Step functions that count their invocations and may fail once."""

    def __init__(self) -> None:
        self.calls: Counter = Counter()
        self.fail: set = set()
        self.lock = threading.Lock()

    def step(self, name: str, value: Any) -> Callable[[], Any]:
        def fn() -> Any:
            with self.lock:
                self.calls[name] += 1
            if name in self.fail:
                raise RuntimeError(f"step {name} failed")
            return value

        return fn


def specs(c: Counted) -> List[Any]:
    # Every accepted spec form: Step, tuple, mapping.
    return [
        cairn.Step("a", "id-a", c.step("a", {"a": 1})),
        ("b", "id-b", c.step("b", [1, 2, 3])),
        {"step_id": "c", "identity": "id-c", "fn": c.step("c", "cee")},
        cairn.Step("d", "id-d", c.step("d", None)),
        cairn.Step("e", "id-e", c.step("e", 5)),
    ]


def test_parallel_resumable_resumes_after_failure(client: cairn.Client) -> None:
    client.save("s", change={"append_messages": [msg(0)]})
    c = Counted()
    c.fail = {"b", "d"}
    with pytest.raises(RuntimeError, match="step (b|d) failed"):
        client.parallel_resumable(specs(c), "wf", session_id="s")
    assert c.calls == Counter(a=1, b=1, c=1, d=1, e=1)
    done = {r["step_id"] for r in client.begin_workflow("wf", specs(Counted()), "s")["completed"]}
    assert done == {"a", "c", "e"}

    # The rerun runs only the failed steps; results come back in spec order.
    c.fail = set()
    out = client.parallel_resumable(specs(c), "wf", session_id="s")
    assert out == [{"a": 1}, [1, 2, 3], "cee", None, 5]
    assert c.calls == Counter(a=1, b=2, c=1, d=2, e=1)

    # Everything done: nothing runs, recorded results are returned.
    out = client.parallel_resumable(specs(c), "wf", session_id="s")
    assert out == [{"a": 1}, [1, 2, 3], "cee", None, 5]
    assert sum(c.calls.values()) == 7
    client.finish_workflow("wf")


def test_parallel_resumable_identity_changed_runs_nothing(client: cairn.Client) -> None:
    client.save("s", change={"append_messages": [msg(0)]})
    c = Counted()
    client.parallel_resumable([cairn.Step("a", "v1", c.step("a", 1)), cairn.Step("b", "v1", c.step("b", 2))], "wf", session_id="s")
    with pytest.raises(cairn.StepIdentityChangedError):
        client.parallel_resumable(
            [cairn.Step("a", "v2", c.step("a", 1)), cairn.Step("b", "v1", c.step("b", 2)), cairn.Step("x", "v1", c.step("x", 3))],
            "wf",
            session_id="s",
        )
    assert c.calls == Counter(a=1, b=1)


def test_parallel_resumable_runs_concurrently(embedded: cairn.Client) -> None:
    embedded.save("s", change={"append_messages": [msg(0)]})
    n = 4
    barrier = threading.Barrier(n, timeout=30)

    def fn(i: int) -> Callable[[], int]:
        def run() -> int:
            barrier.wait()  # only passes if all n steps run at once
            return i

        return run

    out = embedded.parallel_resumable([cairn.Step(f"s{i}", "v", fn(i)) for i in range(n)], "wf", session_id="s")
    assert out == list(range(n))


def test_parallel_resumable_bad_specs(embedded: cairn.Client) -> None:
    with pytest.raises(TypeError):
        embedded.parallel_resumable([{"step_id": "a", "identity": "x"}], "wf")
    with pytest.raises(TypeError):
        embedded.parallel_resumable([cairn.Step("a", "x", 42)], "wf")  # type: ignore[arg-type]
