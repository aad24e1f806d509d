#!/usr/bin/env bash
# The cross-language scenario (run_scenario.sh) once more with every stage's
# daemon keeping its sessions in one PostgreSQL database (CAIRN_STORE), on a
# throwaway server from internal/pgtest/pgserve.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
fifo="$(mktemp -u)"
mkfifo "$fifo"
out="$(mktemp)"
# pgserve serves until its standard input closes: hold it open on fd 9.
(cd "$root" && go run ./internal/pgtest/pgserve xlang <"$fifo" >"$out") &
pg_pid=$!
exec 9>"$fifo"
rm -f "$fifo"
cleanup() { exec 9>&-; wait "$pg_pid" 2>/dev/null || true; rm -f "$out"; }
trap cleanup EXIT
for _ in $(seq 600); do
	[ -s "$out" ] && break
	kill -0 "$pg_pid" 2>/dev/null || { wait "$pg_pid" || rc=$?; [ "${rc:-0}" -eq 4 ] && { echo "CAIRN_SKIP_PG=1: skipping"; exit 0; }; echo "pgserve failed" >&2; exit 1; }
	sleep 0.1
done
CAIRN_STORE="$(head -1 "$out")"
export CAIRN_STORE
bash "$here/run_scenario.sh"
