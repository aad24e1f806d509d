"""The Python side of bench/goembedfloor: loads the Go floor library
(built with -buildmode=c-shared) and returns its commit as a function of
bytes. Used by bench/agent/embedded_floor.py and
bench/adapters/putfloor.py; a process can hold one Go runtime, so a
process that loads it must not load libcairn."""

import ctypes
import os
from typing import Callable


def open_floor(lib: str, path: str) -> Callable[[bytes], None]:
    """Makes path the floor's data file (synced zeros) and returns a
    function that commits its bytes argument: one pwrite into the zeros
    and one fdatasync, through ctypes and cgo as libcairn's calls go."""
    dll = ctypes.CDLL(lib)
    fn = dll.floor_commit
    fn.argtypes = [ctypes.c_char_p, ctypes.c_size_t]
    fn.restype = ctypes.c_longlong
    if dll.floor_open(os.fsencode(path)) != 0:
        raise RuntimeError(f"floor_open {path} failed")

    def commit(b: bytes) -> None:
        if fn(b, len(b)) < 0:
            raise RuntimeError("floor_commit failed")

    return commit
