"""A cargo project that depends on the packaged crates works on its own:
`make test-dist-rust`.

    python3 dist_test.py dist/cargo [--target-dir DIR]

Creates a new cargo project in a temp dir, appends dist/cargo/dependency.toml
(and serde_json) to its Cargo.toml, and builds a program with a clean
environment (``env -i`` with PATH holding cargo, go and cc, HOME, and the
cargo and rustup homes). The build compiles libcairn and cairnd from the Go
sources inside the packaged cairn-sessions-sys. Then, with ``env -i
PATH=/usr/bin:/bin HOME=<temp>`` (no CAIRN_*, no LD_LIBRARY_PATH), the
program:

1. connects in daemon mode to a temp workspace where no daemon runs, which
   auto-starts the cairnd built with the crate (checked through
   /proc/<pid>/exe, with the pid from the workspace's .cairn/LOCK), saves a
   message and checkpoints a run's turn; no libcairn.so is mapped into it;
2. that cairnd is killed with SIGKILL;
3. it connects again, which auto-starts a new cairnd; resume_session and
   resume_run return what was saved.

--target-dir keeps the cargo build between runs (a cold one compiles serde
and the Go runtime). Every step has a time limit; daemons started here are
killed and the temp dir removed whatever happens. Prints "N passed, 0
failed" or fails.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Dict, List

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tools"))
from procs import alive, kill_daemons  # noqa: E402

BUILD_TIMEOUT = 900
STEP_TIMEOUT = 60

MAIN_RS = r"""
use cairn::{Change, CheckpointRequest, Options, Usage};
use serde_json::json;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let (mode, ws) = (args[1].as_str(), &args[2]);
    let c = cairn::connect(Options::new(ws))?;
    let pid = c.status()?.daemon.ok_or("no daemon status")?.pid;
    let maps = std::fs::read_to_string("/proc/self/maps")?;
    let mut out = json!({
        "pid": pid,
        "built_daemon": cairn::sys::DAEMON,
        "libcairn_so_mapped": maps.contains("libcairn.so"),
    });
    if mode == "save" {
        c.save("s1", &Change::append_messages([json!({"role": "user", "content": "hello from the crate"})]), None)?;
        let run = c.begin_run("s1", Some("r1"))?;
        let turn = [json!({"role": "assistant", "content": "turn one"})];
        c.checkpoint(&CheckpointRequest {
            run_id: (&run.run_id).into(),
            turn: 1,
            new_messages: (&turn[..]).into(),
            usage: Usage::default(),
            tool_calls_count: 1,
            ..Default::default()
        })?;
    } else {
        let s = c.resume_session("s1")?;
        let r = c.resume_run("r1", None, Some("r2"))?;
        out["messages"] = json!(s.snapshot.messages.iter().map(|m| m["content"].clone()).collect::<Vec<_>>());
        out["interrupted"] = json!(s.interrupted_runs.iter().map(|x| x.run_id.clone()).collect::<Vec<_>>());
        out["run_turn"] = json!(r.turn);
        out["run_messages"] = json!(r.messages.iter().map(|m| m["content"].clone()).collect::<Vec<_>>());
    }
    c.close()?;
    println!("{out}");
    Ok(())
}
"""


def tool_dir(name: str) -> str:
    path = shutil.which(name)
    if not path:
        raise AssertionError(f"{name} is not on PATH; the packaged crate needs it to build")
    return str(Path(path).parent)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("dist", type=Path, help="the directory `make dist-rust` wrote (dist/cargo)")
    ap.add_argument("--target-dir", type=Path, help="CARGO_TARGET_DIR for the build (default: in the temp dir)")
    args = ap.parse_args()
    dist = args.dist.resolve()
    repo = Path(__file__).resolve().parents[2]
    tmp = Path(tempfile.mkdtemp(prefix="cairn-dist-rust-"))
    passed = 0

    def run(argv: List[str], env: Dict[str, str], cwd: Path, timeout: float = STEP_TIMEOUT) -> str:
        r = subprocess.run(argv, env=env, cwd=str(cwd), capture_output=True, text=True, timeout=timeout)
        if r.returncode != 0:
            raise AssertionError(f"{argv[:3]} exited {r.returncode}:\n{r.stdout}\n{r.stderr}")
        return r.stdout

    def check(cond: bool, what: str) -> None:
        nonlocal passed
        if not cond:
            raise AssertionError(what)
        passed += 1
        print(f"ok: {what}")

    def lock_pid(ws: Path) -> int:
        return int((ws / ".cairn" / "LOCK").read_text().split()[0])

    try:
        home = tmp / "home"
        home.mkdir()
        ws = tmp / "ws"
        ws.mkdir()
        target = (args.target_dir or tmp / "target").resolve()

        # The build's clean environment: the tools' directories on PATH, the
        # real cargo and rustup homes (their registry cache and toolchains)
        # and the real HOME (Go's build cache); nothing else.
        real_home = os.environ.get("HOME", str(home))
        path = ":".join(dict.fromkeys([tool_dir("cargo"), tool_dir("go"), tool_dir("cc"), "/usr/bin", "/bin"]))
        build_env = {"PATH": path, "HOME": real_home, "CARGO_TARGET_DIR": str(target)}
        for var in ("CARGO_HOME", "RUSTUP_HOME", "RUSTUP_TOOLCHAIN"):
            if os.environ.get(var):
                build_env[var] = os.environ[var]

        run(["cargo", "new", "--quiet", "--vcs", "none", "app"], build_env, tmp)
        app = tmp / "app"
        with open(app / "Cargo.toml", "a") as f:
            f.write((dist / "dependency.toml").read_text())
            f.write('\n[dependencies.serde_json]\nversion = "1"\n')
        (app / "src" / "main.rs").write_text(MAIN_RS)
        run(["cargo", "build", "--quiet"], build_env, app, timeout=BUILD_TIMEOUT)
        binary = target / "debug" / "app"
        check(binary.is_file(), "the dependent builds against dist/cargo/dependency.toml")

        env = {"PATH": "/usr/bin:/bin", "HOME": str(home)}
        first = json.loads(run([str(binary), "save", str(ws)], env, ws))
        check(first["pid"] == lock_pid(ws), f"the auto-started cairnd holds the workspace lock (pid {first['pid']})")
        check(not first["libcairn_so_mapped"], "no libcairn.so is loaded: libcairn is linked in")
        built = Path(first["built_daemon"] or "")
        check(
            built.is_absolute() and built.is_relative_to(target) and built != repo / "build" / "cairnd",
            f"the crate built its own cairnd ({built})",
        )
        check(Path(f"/proc/{first['pid']}/exe").resolve() == built.resolve(), "connect() auto-started the crate's cairnd")

        os.kill(first["pid"], signal.SIGKILL)
        deadline = time.monotonic() + STEP_TIMEOUT
        while alive(first["pid"]) and time.monotonic() < deadline:
            time.sleep(0.02)
        check(not alive(first["pid"]), "the daemon is gone after SIGKILL")

        second = json.loads(run([str(binary), "resume", str(ws)], env, ws))
        check(second["pid"] != first["pid"] and second["pid"] == lock_pid(ws), "connect() auto-started a new cairnd")
        check(Path(f"/proc/{second['pid']}/exe").resolve() == built.resolve(), "the new cairnd is the crate's too")
        check(second["messages"][:1] == ["hello from the crate"], f"the saved message survived ({second['messages']})")
        check("r1" in second["interrupted"], f"the killed run is reported interrupted ({second['interrupted']})")
        check(
            second["run_turn"] == 1 and "turn one" in second["run_messages"],
            f"resume_run resumes from the checkpoint (turn {second['run_turn']})",
        )
        print(f"{passed} passed, 0 failed")
        return 0
    except (AssertionError, subprocess.SubprocessError, ValueError, KeyError, OSError) as e:
        print(f"FAIL: {e}", file=sys.stderr)
        print(f"{passed} passed, 1 failed")
        return 1
    finally:
        # Every cairnd that ran on this workspace, including one a step
        # that failed started, names the temp dir in its command line.
        kill_daemons(str(tmp))
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
