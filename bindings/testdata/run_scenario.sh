#!/usr/bin/env bash
# The cross-language scenario of scenario.json, across two workspaces, each
# with its real daemon:
#   1. Python, in workspace A, saves the session, checkpoints two turns of a
#      run and completes half a workflow, exports the session (export), then
#      is killed with SIGKILL;
#   2. Node.js imports the export into workspace B, resumes the session and
#      the run there (from the imported checkpoint), checkpoints a turn and
#      completes it;
#   3. Rust, in workspace B, finishes the workflow (parallel resumable: the
#      steps Python completed in A are skipped) and reports the runs.
# Stages 2 and 3 print canonical JSON, compared byte for byte with
# expected_node.json and expected_rust.json (made by gen_expected.py without
# cairn). With CAIRN_STORE set (run_scenario_pg.sh) the three stages share
# that PostgreSQL database instead: workspace A's daemon is stopped cleanly
# after Python is killed (releasing its leases), and Node.js finds the
# session already there rather than importing it. Needs build/libcairn.so, build/cairnd, the Python and Node.js
# bindings (npm ci done) and cargo.
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
cairnd="$root/build/cairnd"
ws="$(mktemp -d)"
ws2="$(mktemp -d)"
out="$(mktemp -d)"
py_pid=""
daemon_pid=""

cleanup() {
	if [ -n "$py_pid" ]; then kill -9 "$py_pid" 2>/dev/null || true; fi
	if [ -n "$daemon_pid" ]; then
		kill -TERM "$daemon_pid" 2>/dev/null || true
		for _ in $(seq 50); do kill -0 "$daemon_pid" 2>/dev/null || break; sleep 0.1; done
		kill -9 "$daemon_pid" 2>/dev/null || true
	fi
	"$root/build/cairn" --workspace "$ws2" daemon stop >/dev/null 2>&1 || true
	rm -rf "$ws" "$ws2" "$out"
}
trap cleanup EXIT

export CAIRN_LIBRARY="$root/build/libcairn.so" CAIRN_DAEMON="$cairnd"

# 1. Python, killed once it reports READY.
python3 "$here/stages/python_stage.py" "$ws" "$cairnd" "$out/export.json" > "$out/python.out" &
py_pid=$!
for _ in $(seq 300); do
	grep -q '^READY$' "$out/python.out" 2>/dev/null && break
	kill -0 "$py_pid" 2>/dev/null || { cat "$out/python.out"; echo "python stage died" >&2; exit 1; }
	sleep 0.1
done
grep -q '^READY$' "$out/python.out" || { echo "python stage never got ready" >&2; exit 1; }
daemon_pid="$(sed -n 's/^daemon_pid=//p' "$out/python.out")"
{ kill -9 "$py_pid" && wait "$py_pid"; } 2>/dev/null || true # bash would report "Killed"
py_pid=""
if [ -n "${CAIRN_STORE:-}" ]; then
	# Host A goes away cleanly, giving up its run's and workflow's leases.
	kill -TERM "$daemon_pid"
	for _ in $(seq 100); do kill -0 "$daemon_pid" 2>/dev/null || break; sleep 0.1; done
	daemon_pid=""
fi

# 2. Node.js.
node "$here/stages/node_stage.js" "$ws2" "$cairnd" "$here/scenario.json" "$out/export.json" > "$out/node.json"

# 3. Rust.
(cd "$root/bindings/rust" && cargo run --quiet --locked --example xlang_stage -- "$ws2" "$cairnd" "$here/scenario.json") > "$out/rust.json"

passed=0
failed=0
for stage in node rust; do
	if cmp -s "$here/expected_$stage.json" "$out/$stage.json"; then
		echo "ok   $stage stage agrees byte for byte with expected_$stage.json"
		passed=$((passed + 1))
	else
		echo "FAIL $stage stage differs from expected_$stage.json:"
		diff <(python3 -m json.tool "$here/expected_$stage.json") <(python3 -m json.tool "$out/$stage.json") || true
		failed=$((failed + 1))
	fi
done
echo "xlang: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
