"""Loads a checkout's Python binding under a name of its own, so that two
checkouts' bindings (and their LangGraph savers) run side by side in one
process: bench/adapters/saver_cold_ab.py, bench/agent/binding_ab.py."""
from __future__ import annotations

import importlib
import importlib.util
import sys
from pathlib import Path
from types import ModuleType


def load(name: str, root: str) -> ModuleType:
    """The cairn package of the checkout at root, imported as name (with
    its langgraph module as name.langgraph)."""
    pkg = Path(root).resolve() / "bindings" / "python" / "cairn"
    spec = importlib.util.spec_from_file_location(name, pkg / "__init__.py", submodule_search_locations=[str(pkg)])
    assert spec is not None and spec.loader is not None
    m = importlib.util.module_from_spec(spec)
    sys.modules[name] = m
    spec.loader.exec_module(m)
    importlib.import_module(name + ".langgraph")
    return m
