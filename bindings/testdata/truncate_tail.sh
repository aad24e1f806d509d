#!/usr/bin/env bash
# The truncate/tail scenario of truncate_tail.json: one language truncates,
# another reads the tail, through one real daemon:
#   1. Python saves messages and artifacts, then truncates and appends in
#      one change, puts one artifact and deletes the other;
#   2. Node.js reads the tail, pages through every message and reads the
#      artifacts, checks them, then truncates and appends in turn;
#   3. Python reads the tail and the summary Node.js left and checks them.
# Each stage exits non-zero, saying what differs, when a read is wrong.
# Needs build/libcairn.so, build/cairnd and the Node.js binding (npm ci).
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
cairnd="$root/build/cairnd"
ws="$(mktemp -d)"
daemon_pid=""

cleanup() {
	if [ -n "$daemon_pid" ]; then
		kill -TERM "$daemon_pid" 2>/dev/null || true
		for _ in $(seq 50); do kill -0 "$daemon_pid" 2>/dev/null || break; sleep 0.1; done
		kill -9 "$daemon_pid" 2>/dev/null || true
	fi
	rm -rf "$ws"
}
trap cleanup EXIT

export CAIRN_LIBRARY="$root/build/libcairn.so" CAIRN_DAEMON="$cairnd"

timeout 60 python3 "$here/stages/truncate_python.py" write "$ws" "$cairnd" > "$ws/python.out"
daemon_pid="$(sed -n 's/^daemon_pid=//p' "$ws/python.out")"
[ -n "$daemon_pid" ] || { cat "$ws/python.out"; echo "python write stage reported no daemon" >&2; exit 1; }
timeout 60 node "$here/stages/truncate_node.js" "$ws" "$cairnd" "$here/truncate_tail.json"
timeout 60 python3 "$here/stages/truncate_python.py" read "$ws" "$cairnd"
echo "xlang truncate/tail: Python truncated, Node.js read the tail; Node.js truncated, Python read the tail"
