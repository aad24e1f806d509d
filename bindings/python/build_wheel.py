"""Builds the platform wheel of the Python binding with the standard library.

    python3 build_wheel.py --lib build/libcairn.so --daemon build/cairnd \
        --cli build/cairn --license LICENSE --out dist/

The wheel holds the pure-Python package ``cairn`` and, inside it, next to
each other: ``libcairn.so``, ``cairnd`` and the Go CLI as ``cairn-cli``.
Keeping cairnd next to libcairn is what lets
the client find it (next to the loaded library), and keeping the CLI next to
cairnd lets the CLI find it (next to its executable). A ``cairn`` console
script (``cairn._cli:main``) runs that CLI.

The platform tag is computed from the binaries, not assumed: on Linux,
``manylinux_X_Y_<arch>`` where X.Y is the newest glibc symbol version that
libcairn.so or cairnd needs (``musllinux_1_2_<arch>`` on musl); elsewhere the
interpreter's platform (``sysconfig.get_platform()``). The Python tag is
``py3-none``: the package is ctypes over a C ABI, with no extension module.

No build dependency: setuptools' bdist_wheel needs the ``wheel`` package
before setuptools 70.1, and a build that must work offline cannot fetch it.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import os
import platform
import re
import sys
import sysconfig
import zipfile
from pathlib import Path
from typing import List, Tuple

HERE = Path(__file__).resolve().parent
# The distribution name: `cairn` on PyPI is another project's.
DIST_NAME = "cairn-sessions"

# The optional framework adapters (cairn.langgraph, cairn.agents): ranges
# that hold the exact versions constraints-adapters.txt tests against.
EXTRAS = {
    "langgraph": ["langgraph>=1.2,<2", "langgraph-checkpoint>=4.3,<5"],
    "agents": ["openai-agents>=0.24,<1"],
}


def project_version() -> str:
    m = re.search(r'^version\s*=\s*"([^"]+)"', (HERE / "pyproject.toml").read_text(), re.M)
    if not m:
        raise SystemExit("build_wheel: no version in pyproject.toml")
    return m.group(1)


def _glibc_needed(paths: List[Path]) -> Tuple[int, int]:
    """The newest GLIBC_X.Y symbol version named by any of the ELF files.

    The version-needed names sit in the dynamic string table as plain
    strings, so a scan of the bytes finds them without an ELF parser; a
    static binary names none."""
    best = (2, 17)  # manylinux2014's floor: older tags are not worth claiming
    for p in paths:
        for m in re.finditer(rb"GLIBC_(\d+)\.(\d+)", p.read_bytes()):
            best = max(best, (int(m.group(1)), int(m.group(2))))
    return best


def platform_tag(binaries: List[Path]) -> str:
    if sys.platform.startswith("linux"):
        arch = platform.machine().lower()
        arch = {"amd64": "x86_64", "arm64": "aarch64"}.get(arch, arch)
        libc, _ = platform.libc_ver()
        if libc != "glibc":
            return f"musllinux_1_2_{arch}"
        major, minor = _glibc_needed(binaries)
        return f"manylinux_{major}_{minor}_{arch}"
    return re.sub(r"[^A-Za-z0-9]", "_", sysconfig.get_platform())


def _record_line(name: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{name},sha256={digest},{len(data)}"


def build(lib: Path, daemon: Path, cli: Path, license_file: Path, out: Path) -> Path:
    version = project_version()
    tag = f"py3-none-{platform_tag([lib, daemon, cli])}"
    norm = DIST_NAME.replace("-", "_")
    info = f"{norm}-{version}.dist-info"
    files: List[Tuple[str, bytes, int]] = []  # name, data, mode

    pkg = HERE / "cairn"
    for p in sorted(pkg.iterdir()):
        if p.suffix == ".py" or p.name == "py.typed":
            files.append((f"cairn/{p.name}", p.read_bytes(), 0o644))
    files.append((f"cairn/{lib.name}", lib.read_bytes(), 0o755))
    files.append(("cairn/cairnd", daemon.read_bytes(), 0o755))
    files.append(("cairn/cairn-cli", cli.read_bytes(), 0o755))

    readme = (HERE / "README.md").read_text()
    metadata = (
        "Metadata-Version: 2.1\n"
        f"Name: {DIST_NAME}\n"
        f"Version: {version}\n"
        "Summary: Durable session state for coding agents: Python binding of libcairn,"
        " with libcairn and cairnd\n"
        "License: Apache-2.0\n"
        "Requires-Python: >=3.8\n"
        + "".join(f"Provides-Extra: {x}\n" for x in EXTRAS)
        + "".join(f'Requires-Dist: {r}; extra == "{x}"\n' for x, reqs in EXTRAS.items() for r in reqs)
        + "Classifier: Programming Language :: Python :: 3\n"
        "Classifier: License :: OSI Approved :: Apache Software License\n"
        "Classifier: Typing :: Typed\n"
        "Description-Content-Type: text/markdown\n"
        "\n" + readme
    )
    wheel = (
        "Wheel-Version: 1.0\n"
        "Generator: cairn build_wheel.py\n"
        "Root-Is-Purelib: false\n"
        f"Tag: {tag}\n"
    )
    files.append((f"{info}/METADATA", metadata.encode(), 0o644))
    files.append((f"{info}/WHEEL", wheel.encode(), 0o644))
    files.append((f"{info}/entry_points.txt", b"[console_scripts]\ncairn = cairn._cli:main\n", 0o644))
    files.append((f"{info}/top_level.txt", b"cairn\n", 0o644))
    files.append((f"{info}/LICENSE", license_file.read_bytes(), 0o644))

    record = [_record_line(n, d) for n, d, _ in files] + [f"{info}/RECORD,,"]
    files.append((f"{info}/RECORD", ("\n".join(record) + "\n").encode(), 0o644))

    out.mkdir(parents=True, exist_ok=True)
    path = out / f"{norm}-{version}-{tag}.whl"
    tmp = path.with_suffix(".whl.tmp")
    with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as z:
        for name, data, mode in files:
            zi = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))
            zi.external_attr = (0o100000 | mode) << 16  # regular file; pip keeps the x bits
            zi.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(zi, data)
    os.replace(tmp, path)
    return path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lib", type=Path, required=True)
    ap.add_argument("--daemon", type=Path, required=True)
    ap.add_argument("--cli", type=Path, required=True)
    ap.add_argument("--license", type=Path, required=True)
    ap.add_argument("--out", type=Path, required=True)
    a = ap.parse_args()
    print(build(a.lib, a.daemon, a.cli, a.license, a.out))


if __name__ == "__main__":
    main()
