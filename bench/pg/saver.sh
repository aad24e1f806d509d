#!/usr/bin/env bash
# Runs postgressaver.py on a throwaway PostgreSQL server (pgserve), in a
# virtualenv under build/ holding langgraph-checkpoint-postgres and psycopg
# from PyPI (made on first use).
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
venv="$root/build/pgsaver-venv"
if [ ! -x "$venv/bin/python" ]; then
	python3 -m venv "$venv"
	"$venv/bin/pip" install -q langgraph-checkpoint-postgres "psycopg[binary]"
fi
fifo="$(mktemp -u)"
mkfifo "$fifo"
out="$(mktemp)"
(cd "$root" && go run ./internal/pgtest/pgserve saver <"$fifo" >"$out") &
pg_pid=$!
exec 9>"$fifo"
rm -f "$fifo"
cleanup() { exec 9>&-; wait "$pg_pid" 2>/dev/null || true; rm -f "$out"; }
trap cleanup EXIT
for _ in $(seq 600); do
	[ -s "$out" ] && break
	kill -0 "$pg_pid" 2>/dev/null || { echo "pgserve failed" >&2; exit 1; }
	sleep 0.1
done
PYTHONPATH="$root/bindings/python" CAIRN_LIBRARY="$root/build/libcairn.so" CAIRN_DAEMON="$root/build/cairnd" \
	"$venv/bin/python" "$root/bench/pg/postgressaver.py" "$(head -1 "$out")" "${TURNS:-1000}"
