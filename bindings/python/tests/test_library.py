"""Finding libcairn: CAIRN_LIBRARY, next to the package, the repo's build/."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import cairn
from cairn import _lib
from conftest import REPO

PKG = Path(cairn.__file__).resolve().parent
BUILT = REPO / "build" / _lib.LIBRARY_NAME


def py(code: str, env: dict, cwd: str) -> subprocess.CompletedProcess:
    e = {k: v for k, v in os.environ.items() if k not in ("CAIRN_LIBRARY", "PYTHONPATH")}
    e.update(env)
    return subprocess.run([sys.executable, "-c", code], env=e, cwd=cwd, capture_output=True, text=True, timeout=60)


def test_version() -> None:
    assert cairn.version()


def test_candidate_order(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CAIRN_LIBRARY", "/x/libcairn.so")
    c = _lib.candidates()
    assert c[0] == Path("/x/libcairn.so")
    assert c[1] == PKG / _lib.LIBRARY_NAME
    assert BUILT in c
    monkeypatch.delenv("CAIRN_LIBRARY")
    assert _lib.find() == BUILT or _lib.find().parent in (PKG, PKG.parent)


def test_cairn_library_env(workspace: str) -> None:
    copy = Path(workspace) / "elsewhere" / _lib.LIBRARY_NAME
    copy.parent.mkdir()
    os.symlink(BUILT, copy)
    code = "import cairn, cairn._lib as l; print(l.find()); c = cairn.connect('.', embedded=True); print(c.status()['mode']); c.close()"
    r = py(code, {"CAIRN_LIBRARY": str(copy), "PYTHONPATH": str(PKG.parent)}, workspace)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == [str(copy), "embedded"]


def test_cairn_library_env_missing(workspace: str) -> None:
    code = "import cairn\ntry:\n    cairn.connect('.', embedded=True)\nexcept cairn.LibraryNotFoundError as e:\n    print('missing', e)\n"
    r = py(code, {"CAIRN_LIBRARY": "/nonexistent/libcairn.so", "PYTHONPATH": str(PKG.parent)}, workspace)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("missing") and "/nonexistent/libcairn.so" in r.stdout


def test_next_to_package(workspace: str) -> None:
    # An installed copy of the package with the library beside its modules.
    site = Path(workspace) / "site"
    shutil.copytree(PKG, site / "cairn", ignore=shutil.ignore_patterns("__pycache__", _lib.LIBRARY_NAME))
    os.symlink(BUILT, site / "cairn" / _lib.LIBRARY_NAME)
    code = "import cairn, cairn._lib as l; print(l.find()); c = cairn.connect('.', embedded=True); c.close()"
    r = py(code, {"PYTHONPATH": str(site)}, workspace)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == str(site / "cairn" / _lib.LIBRARY_NAME)


def test_not_found_anywhere(workspace: str) -> None:
    site = Path(workspace) / "site"
    shutil.copytree(PKG, site / "cairn", ignore=shutil.ignore_patterns("__pycache__", _lib.LIBRARY_NAME))
    code = "import cairn\ntry:\n    cairn.version()\nexcept cairn.LibraryNotFoundError as e:\n    print('missing', e)\n"
    r = py(code, {"PYTHONPATH": str(site)}, workspace)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("missing") and "make lib" in r.stdout


def test_many_processes_load_at_once() -> None:
    """dlopen of libcairn never hangs. Its C constructor and the Go runtime,
    which initialises on a thread of its own during dlopen, must not both
    ask the loader where the library is: the Go thread would wait for the
    loader's lock, which dlopen holds, while the constructor waited for the
    Go thread. Loads started together hit that window; one in ten to one in
    four hung before the constructor alone recorded the path."""
    lib = str(_lib.find())
    code = "import ctypes, sys; l = ctypes.CDLL(sys.argv[1]); l.cairn_version.restype = ctypes.c_char_p; print(l.cairn_version().decode())"
    hung = 0
    for _ in range(3):
        procs = [subprocess.Popen([sys.executable, "-c", code, lib], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
                 for _ in range(24)]
        for p in procs:
            try:
                out, err = p.communicate(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()
                p.communicate()
                hung += 1
                continue
            assert p.returncode == 0, err
            assert out.strip(), err
    assert hung == 0, f"{hung} of 72 processes hung loading {lib}"
