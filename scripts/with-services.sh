#!/usr/bin/env bash
# Usage: scripts/with-services.sh COMMAND [ARGS…]
# Starts a throwaway PostgreSQL (initdb in a temporary folder, free port on 127.0.0.1) and a
# throwaway Redis, exports DATABASE_URL, REDIS_URL and TEST_BROKER_URL for COMMAND, and stops
# both by PID when COMMAND ends, whether it passed or failed. Exits with COMMAND's status.
set -euo pipefail

pg_bin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)
[ -n "$pg_bin" ] || { echo "PostgreSQL binaries not found (run scripts/ensure-system-packages.sh)" >&2; exit 1; }
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

tmp=$(mktemp -d /tmp/tfp-services.XXXXXX)
chmod 755 "$tmp"
pg_port=$(free_port)
redis_port=$(free_port)
as_pg=()
if [ "$(id -u)" -eq 0 ]; then as_pg=(runuser -u postgres --); chown postgres "$tmp"; fi

cleanup() {
  status=$?
  if [ -f "$tmp/pg/postmaster.pid" ]; then
    pid=$(head -n 1 "$tmp/pg/postmaster.pid")
    "${as_pg[@]}" "$pg_bin/pg_ctl" -D "$tmp/pg" -m immediate stop >/dev/null 2>&1 || kill -9 "$pid" 2>/dev/null || true
  fi
  if [ -f "$tmp/redis.pid" ]; then kill "$(cat "$tmp/redis.pid")" 2>/dev/null || true; fi
  rm -rf "$tmp"
  exit "$status"
}
trap cleanup EXIT INT TERM

"${as_pg[@]}" "$pg_bin/initdb" -D "$tmp/pg" -U postgres -A trust -E UTF8 --no-sync >"$tmp/initdb.log" 2>&1 \
  || { cat "$tmp/initdb.log" >&2; exit 1; }
"${as_pg[@]}" "$pg_bin/pg_ctl" -D "$tmp/pg" -l "$tmp/pg/server.log" -w -t 60 start -o \
  "-p $pg_port -k $tmp/pg -c listen_addresses=127.0.0.1 -c max_connections=200 -c fsync=off -c synchronous_commit=off -c full_page_writes=off" >/dev/null
"$pg_bin/createdb" -h 127.0.0.1 -p "$pg_port" -U postgres portal

redis-server --port "$redis_port" --bind 127.0.0.1 --daemonize yes --pidfile "$tmp/redis.pid" \
  --dir "$tmp" --save "" --appendonly no --logfile "$tmp/redis.log"
for _ in $(seq 50); do redis-cli -p "$redis_port" ping >/dev/null 2>&1 && break; sleep 0.1; done

export DATABASE_URL="postgres://postgres@127.0.0.1:$pg_port/portal"
export REDIS_URL="redis://127.0.0.1:$redis_port/1"
export TEST_BROKER_URL="redis://127.0.0.1:$redis_port/0"
export PG_BIN="$pg_bin" PG_DATA="$tmp/pg" REDIS_PORT="$redis_port"
echo "services: PostgreSQL on 127.0.0.1:$pg_port, Redis on 127.0.0.1:$redis_port"
set +e
"$@"
