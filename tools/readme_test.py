"""Runs every fenced code block of README.md: `make test-readme`.

    python3 tools/readme_test.py [--readme README.md] [--dist dist] [--env K=V ...]

The blocks are extracted from the README itself, in order, and run as a
newcomer would run them, from a fresh temp directory T that stands for the
repository root: T/dist is a link to the dist directory (`make dist`'s
output), and nothing else of the repository is there. Every block runs with
a clean environment (`env -i` with PATH and HOME only, plus --env pairs),
with T/.venv/bin first on PATH (the venv the README's install block makes),
under a time limit.

A block's info string says how it runs; its first word is the language:

- ``sh`` (or ``bash``): a bash script (`set -euo pipefail`), cwd T;
- ``python``: a program run by T/.venv/bin/python, cwd T;
- ``mjs`` / ``js``: a program saved as T/demo-node/block<N>.mjs / .js
  and run by node, cwd T/demo-node (the npm project of the README);
- ``rust``: saved as T/demo-rust/src/main.rs and run with `cargo run`,
  cwd T/demo-rust (the cargo project of the README);
- ``text``, or any info string with the word ``norun`` (```` ```sh norun ````):
  not run (shown as skipped). Every other info string fails the test, so a
  new block is never silently left out.

A block fails the test when it exits non-zero or prints a Python
traceback / Rust panic. A block that needs the npm package (a js/mjs block,
or one mentioning dist/npm) or the Rust crate (a rust block, or one
mentioning dist/cargo) fails when that artifact is missing, unless
CAIRN_README_PARTIAL=1 is set: then it is skipped with a loud message.

Every cairnd started under T is killed and T removed at the end. Prints
"N passed, M skipped, 0 failed" or fails.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Dict, List, NamedTuple, Optional

from procs import kill_daemons

BLOCK_TIMEOUT = 600  # a cargo build of serde on a loaded machine
REPO = Path(__file__).resolve().parents[1]


class Block(NamedTuple):
    line: int  # 1-based line of the opening fence
    info: str
    text: str


def blocks(readme: str) -> List[Block]:
    """The fenced (```) code blocks of readme, in order."""
    out: List[Block] = []
    lines = readme.splitlines()
    i = 0
    while i < len(lines):
        m = re.match(r"^(\s*)```(.*)$", lines[i])
        if not m:
            i += 1
            continue
        start, info, body = i, m.group(2).strip(), []
        i += 1
        while i < len(lines) and not re.match(r"^\s*```\s*$", lines[i]):
            body.append(lines[i])
            i += 1
        if i == len(lines):
            raise SystemExit(f"README line {start + 1}: unclosed code block")
        out.append(Block(start + 1, info, "\n".join(body) + "\n"))
        i += 1
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--readme", default=str(REPO / "README.md"))
    ap.add_argument("--dist", default=str(REPO / "dist"))
    ap.add_argument("--env", action="append", default=[], help="K=V added to every block's environment")
    args = ap.parse_args()

    dist = Path(args.dist).resolve()
    partial = os.environ.get("CAIRN_README_PARTIAL") == "1"
    have = {
        "npm": any((dist / "npm").glob("*.tgz")),
        "cargo": (dist / "cargo" / "dependency.toml").is_file(),
    }
    if not list(dist.glob("cairn_sessions-*.whl")):
        print(f"FAIL: no wheel in {dist} (make dist-python)", file=sys.stderr)
        return 1

    tmp = Path(tempfile.mkdtemp(prefix="cairn-readme-"))
    (tmp / "dist").symlink_to(dist)
    env: Dict[str, str] = {
        "PATH": f"{tmp / '.venv' / 'bin'}:{os.environ.get('PATH', '/usr/bin:/bin')}",
        # The real HOME: rustup, cargo and npm keep their toolchains and
        # caches there.
        "HOME": os.environ.get("HOME", str(tmp)),
    }
    for kv in args.env:
        k, _, v = kv.partition("=")
        env[k] = v

    passed = skipped = 0
    try:
        for n, b in enumerate(blocks(Path(args.readme).read_text())):
            words = b.info.split()
            lang = words[0] if words else ""
            where = f"README.md:{b.line} ```{b.info}"
            if lang == "text" or "norun" in words:
                print(f"skip: {where} (not meant to run)")
                skipped += 1
                continue
            needs = None
            if lang in ("js", "mjs") or "dist/npm" in b.text:
                needs = "npm"
            elif lang == "rust" or "dist/cargo" in b.text:
                needs = "cargo"
            if needs and not have[needs]:
                if partial:
                    print(f"SKIP (CAIRN_README_PARTIAL=1, no dist/{needs}): {where} was NOT run", flush=True)
                    skipped += 1
                    continue
                raise AssertionError(f"{where} needs dist/{needs}, which `make dist` did not build")
            cwd = tmp
            if lang in ("sh", "bash"):
                cmd = ["bash", "-euo", "pipefail", "-c", b.text]
            elif lang == "python":
                f = tmp / f"block{n}.py"
                f.write_text(b.text)
                cmd = [str(tmp / ".venv" / "bin" / "python"), str(f)]
            elif lang in ("js", "mjs"):
                cwd = tmp / "demo-node"
                f = cwd / f"block{n}.{lang}"
                f.write_text(b.text)
                cmd = ["node", str(f)]
            elif lang == "rust":
                cwd = tmp / "demo-rust"
                (cwd / "src" / "main.rs").write_text(b.text)
                cmd = ["cargo", "run", "--quiet"]
            else:
                raise AssertionError(f"{where}: unknown info string; use a language this test runs, or `text` / `norun`")
            print(f"run:  {where}", flush=True)
            t0 = time.monotonic()
            try:
                r = subprocess.run(cmd, cwd=str(cwd), env=env, capture_output=True, text=True, timeout=BLOCK_TIMEOUT)
            except (FileNotFoundError, NotADirectoryError) as e:
                raise AssertionError(f"{where}: cannot run {cmd[0]} in {cwd}: {e} (an install block above must make it)")
            out = (r.stdout + r.stderr).strip()
            shown = "\n".join("      | " + line for line in out.splitlines()[-25:])
            if r.returncode != 0 or "Traceback (most recent call last)" in out or "panicked at" in out:
                raise AssertionError(f"{where} exited {r.returncode}:\n{shown}")
            print(f"ok:   {where} ({time.monotonic() - t0:.1f}s)\n{shown}", flush=True)
            passed += 1
        print(f"{passed} passed, {skipped} skipped, 0 failed")
        return 0
    except (AssertionError, subprocess.SubprocessError) as e:
        print(f"FAIL: {e}", file=sys.stderr)
        print(f"{passed} passed, {skipped} skipped, 1 failed")
        return 1
    finally:
        kill_daemons(str(tmp))
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
