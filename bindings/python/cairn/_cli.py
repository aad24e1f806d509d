"""The ``cairn`` console script of the wheel: runs the bundled Go CLI.

The CLI ships inside the package as ``cairn-cli``, next to ``cairnd``, so it
finds the daemon next to its own executable. exec replaces this process, so
signals, exit codes and the terminal are the CLI's own.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path


def main() -> None:
    exe = Path(__file__).resolve().parent / "cairn-cli"
    if not exe.is_file():
        sys.stderr.write(f"cairn: {exe} is missing; this install of cairn-sessions has no CLI\n")
        sys.exit(127)
    os.execv(str(exe), ["cairn", *sys.argv[1:]])


if __name__ == "__main__":
    main()
