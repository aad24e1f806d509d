"""The official LangGraph checkpointer conformance suite
(langgraph-checkpoint-conformance) against cairn.langgraph.CairnSaver,
embedded and through the daemon: every capability, the optional ones
included, must be detected and pass. The suite's own report is printed."""

from __future__ import annotations

from typing import List

import pytest

import cairn
from conftest import connect_daemon, run

# Imported, not importorskip: a missing framework package is a failure.
from langgraph.checkpoint.conformance import checkpointer_test, validate
from langgraph.checkpoint.conformance.capabilities import ALL_CAPABILITIES
from langgraph.checkpoint.conformance.report import ProgressCallbacks

from cairn.langgraph import CairnSaver


@pytest.mark.parametrize("mode", ["embedded", "daemon"])
def test_conformance_full_score(mode: str, workspace: str, daemons: List[int], capsys: pytest.CaptureFixture[str]) -> None:
    c = cairn.connect(workspace, embedded=True) if mode == "embedded" else connect_daemon(workspace, daemons)
    try:

        @checkpointer_test(name=f"CairnSaver ({mode})")
        async def factory():  # type: ignore[no-untyped-def]
            yield CairnSaver(c)

        report = run(validate(factory, progress=ProgressCallbacks.verbose()))
        total = sum(r.tests_passed for r in report.results.values())
        failed = sum(r.tests_failed for r in report.results.values())
        with capsys.disabled():
            # The suite's own summary, shown in `make test-python`'s output.
            print()
            report.print_report()
            print(f"    conformance tests: {total} passed, {failed} failed")
        failures = {k: r.failures for k, r in report.results.items() if not r.passed}
        assert not failures, failures
        assert {k for k, r in report.results.items() if r.detected} == {cap.value for cap in ALL_CAPABILITIES}
        assert report.passed_all()
        assert total >= 81, total
    finally:
        c.close()
