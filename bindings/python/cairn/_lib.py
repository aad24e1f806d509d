"""Finding, loading and describing libcairn for ctypes.

The library is looked up, in order, at:

1. the path in the ``CAIRN_LIBRARY`` environment variable;
2. next to this package (``cairn/libcairn.so``, then its parent directory);
3. ``build/libcairn.so`` in this directory or any parent (the repository's
   build output when running from a checkout).

It is loaded once, on first use, so ``import cairn`` never fails for want of
it.
"""

from __future__ import annotations

import ctypes
import os
import sys
import threading
from pathlib import Path
from typing import List, Optional

from .errors import LibraryNotFoundError

if sys.platform == "darwin":
    LIBRARY_NAME = "libcairn.dylib"
elif sys.platform == "win32":
    LIBRARY_NAME = "cairn.dll"
else:
    LIBRARY_NAME = "libcairn.so"

_lock = threading.Lock()
_lib: Optional[ctypes.CDLL] = None
_path: Optional[Path] = None


def candidates() -> List[Path]:
    """The paths tried, in order (CAIRN_LIBRARY first when set)."""
    out: List[Path] = []
    env = os.environ.get("CAIRN_LIBRARY")
    if env:
        out.append(Path(env))
    here = Path(__file__).resolve().parent
    out.append(here / LIBRARY_NAME)
    out.append(here.parent / LIBRARY_NAME)
    for d in [here, *here.parents]:
        out.append(d / "build" / LIBRARY_NAME)
    return out


def find() -> Path:
    """Returns the path of the library to load, or raises LibraryNotFoundError."""
    env = os.environ.get("CAIRN_LIBRARY")
    if env:
        # An explicit choice is not second-guessed.
        if not Path(env).is_file():
            raise LibraryNotFoundError(f"CAIRN_LIBRARY={env} is not a file")
        return Path(env)
    tried = candidates()
    for p in tried:
        if p.is_file():
            return p
    raise LibraryNotFoundError(
        f"{LIBRARY_NAME} not found; set CAIRN_LIBRARY, or build it with `make lib`. Tried: "
        + ", ".join(str(p) for p in tried)
    )


def _declare(lib: ctypes.CDLL) -> None:
    u64 = ctypes.c_uint64
    vp = ctypes.c_void_p
    pvp = ctypes.POINTER(vp)
    psz = ctypes.POINTER(ctypes.c_size_t)

    lib.cairn_version.argtypes = []
    lib.cairn_version.restype = ctypes.c_char_p
    lib.cairn_open.argtypes = [ctypes.c_char_p, ctypes.POINTER(u64), pvp]
    lib.cairn_open.restype = ctypes.c_int
    # request is declared c_char_p so bytes pass without a copy; None is NULL.
    lib.cairn_call.argtypes = [u64, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_size_t, pvp, psz, pvp]
    lib.cairn_call.restype = ctypes.c_int
    try:
        call_buf = lib.cairn_call_buf
    except AttributeError:  # an older libcairn: cairn_call alone
        pass
    else:
        # buf is a ctypes char array, passed as its address.
        call_buf.argtypes = [u64, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_size_t, vp, ctypes.c_size_t, pvp, psz, pvp]
        call_buf.restype = ctypes.c_int
    try:
        ws_mask = lib.cairn_ws_mask
    except AttributeError:  # an older libcairn: the binding masks in Python
        pass
    else:
        ws_mask.argtypes = [vp, ctypes.c_size_t, ctypes.c_char_p]
        ws_mask.restype = None
    lib.cairn_free.argtypes = [vp]
    lib.cairn_free.restype = None
    lib.cairn_close.argtypes = [u64, pvp]
    lib.cairn_close.restype = ctypes.c_int
    lib.cairn_open_handles.argtypes = []
    lib.cairn_open_handles.restype = ctypes.c_int


def load() -> ctypes.CDLL:
    """Loads libcairn (once) and returns it."""
    global _lib, _path
    lib = _lib
    if lib is not None:
        return lib
    with _lock:
        if _lib is None:
            path = find()
            try:
                lib = ctypes.CDLL(str(path))
            except OSError as e:
                raise LibraryNotFoundError(f"cannot load {path}: {e}") from e
            _declare(lib)
            _lib, _path = lib, path
        return _lib


def daemon_next_to_library() -> Optional[Path]:
    """The cairnd beside the loaded libcairn (the wheel ships them together),
    or None. libcairn looks there itself (dladdr) in builds that do; passing
    it from here keeps older libraries, which look next to the python
    executable instead, working from the wheel."""
    if _path is None:
        return None
    exe = _path.resolve().parent / ("cairnd.exe" if sys.platform == "win32" else "cairnd")
    return exe if exe.is_file() else None
