#!/usr/bin/env bash
# The cross-language scenario of scenario.json, against one real daemon:
#   1. Python saves the session, checkpoints two turns of a run and completes
#      half a workflow, then is killed with SIGKILL;
#   2. Node.js resumes the session and the run, checkpoints a turn and
#      completes it;
#   3. Rust finishes the workflow and reports the runs.
# Stages 2 and 3 print canonical JSON, compared byte for byte with
# expected_node.json and expected_rust.json (made by gen_expected.py without
# cairn). Needs build/libcairn.so, build/cairnd, the Python and Node.js
# bindings (npm ci done) and cargo.
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
cairnd="$root/build/cairnd"
ws="$(mktemp -d)"
py_pid=""
daemon_pid=""

cleanup() {
	if [ -n "$py_pid" ]; then kill -9 "$py_pid" 2>/dev/null || true; fi
	if [ -n "$daemon_pid" ]; then
		kill -TERM "$daemon_pid" 2>/dev/null || true
		for _ in $(seq 50); do kill -0 "$daemon_pid" 2>/dev/null || break; sleep 0.1; done
		kill -9 "$daemon_pid" 2>/dev/null || true
	fi
	rm -rf "$ws"
}
trap cleanup EXIT

export CAIRN_LIBRARY="$root/build/libcairn.so" CAIRN_DAEMON="$cairnd"

# 1. Python, killed once it reports READY.
python3 "$here/stages/python_stage.py" "$ws" "$cairnd" > "$ws/python.out" &
py_pid=$!
for _ in $(seq 300); do
	grep -q '^READY$' "$ws/python.out" 2>/dev/null && break
	kill -0 "$py_pid" 2>/dev/null || { cat "$ws/python.out"; echo "python stage died" >&2; exit 1; }
	sleep 0.1
done
grep -q '^READY$' "$ws/python.out" || { echo "python stage never got ready" >&2; exit 1; }
daemon_pid="$(sed -n 's/^daemon_pid=//p' "$ws/python.out")"
{ kill -9 "$py_pid" && wait "$py_pid"; } 2>/dev/null || true # bash would report "Killed"
py_pid=""

# 2. Node.js.
node "$here/stages/node_stage.js" "$ws" "$cairnd" "$here/scenario.json" > "$ws/node.json"

# 3. Rust.
(cd "$root/bindings/rust" && cargo run --quiet --locked --example xlang_stage -- "$ws" "$cairnd" "$here/scenario.json") > "$ws/rust.json"

passed=0
failed=0
for stage in node rust; do
	if cmp -s "$here/expected_$stage.json" "$ws/$stage.json"; then
		echo "ok   $stage stage agrees byte for byte with expected_$stage.json"
		passed=$((passed + 1))
	else
		echo "FAIL $stage stage differs from expected_$stage.json:"
		diff <(python3 -m json.tool "$here/expected_$stage.json") <(python3 -m json.tool "$ws/$stage.json") || true
		failed=$((failed + 1))
	fi
done
echo "xlang: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
