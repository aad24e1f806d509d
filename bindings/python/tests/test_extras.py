"""The wheel's extras (build_wheel.EXTRAS, pyproject.toml) accept the exact
versions constraints-adapters.txt pins and tests against, and the pinned
versions are the ones installed."""

from __future__ import annotations

import sys
from importlib.metadata import version
from pathlib import Path

from packaging.requirements import Requirement

HERE = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(HERE))
import build_wheel  # noqa: E402

try:
    import tomllib  # type: ignore[import-not-found]
except ImportError:  # Python < 3.11
    tomllib = None


def pins() -> dict:
    out = {}
    for line in (HERE / "constraints-adapters.txt").read_text().splitlines():
        line = line.split("#")[0].strip()
        if line:
            name, v = line.split("==")
            out[name.lower()] = v
    return out


def test_extras_hold_the_pins() -> None:
    p = pins()
    assert set(build_wheel.EXTRAS) == {"langgraph", "agents"}
    for reqs in build_wheel.EXTRAS.values():
        for r in map(Requirement, reqs):
            assert r.name.lower() in p, r
            assert r.specifier.contains(p[r.name.lower()]), (str(r), p[r.name.lower()])


def test_pins_are_installed() -> None:
    for name, v in pins().items():
        assert version(name) == v, name


def test_pyproject_extras_match() -> None:
    if tomllib is None:
        return
    proj = tomllib.loads((HERE / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    for x, reqs in build_wheel.EXTRAS.items():
        assert proj[x] == reqs
