#!/usr/bin/env bash
# Usage: scripts/bench.sh   (BENCH_QUICK=1, BENCH_EVENTS=small,large, BENCH_ROUNDS, BENCH_INGEST)
# Runs tests/bench/run.py against a throwaway PostgreSQL and Redis (scripts/with-services.sh),
# after restarting that PostgreSQL without the test options of with-services.sh (fsync,
# synchronous_commit and full_page_writes back to their durable defaults) and with benchmark
# memory settings. run.py turns durability off with ALTER SYSTEM only while it loads the
# datasets, and back on (and checks it) before it measures anything.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ -z "${BENCH_INSIDE_SERVICES:-}" ]; then
  export BENCH_INSIDE_SERVICES=1
  exec scripts/with-services.sh "$0" "$@"
fi

port=$(.venv/bin/python -c 'import os, urllib.parse as u; print(u.urlsplit(os.environ["DATABASE_URL"]).port)')
as_pg=()
if [ "$(id -u)" -eq 0 ]; then as_pg=(runuser -u postgres --); fi
# The server settings of the measurements; the read replica's standby (goal 22) runs with
# the same (a hot standby needs max_connections at least the primary's).
export BENCH_PG_OPTIONS="-c max_connections=200 -c shared_buffers=1GB -c work_mem=64MB \
  -c maintenance_work_mem=512MB -c max_wal_size=8GB -c checkpoint_timeout=15min"
"${as_pg[@]}" "$PG_BIN/pg_ctl" -D "$PG_DATA" -l "$PG_DATA/server.log" -w -t 120 -m fast restart -o \
  "-p $port -k $PG_DATA -c listen_addresses=127.0.0.1 $BENCH_PG_OPTIONS" >/dev/null
echo "bench: PostgreSQL restarted on 127.0.0.1:$port"
exec .venv/bin/python -m tests.bench.run "$@"
