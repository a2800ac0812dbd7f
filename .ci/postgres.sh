#!/usr/bin/env bash
# Start a throwaway PostgreSQL for the ledger tests and print the line that points them at it:
#   eval "$(.ci/postgres.sh)"      # sets GPUPOOL_TEST_PG_URL
# Installs Debian's postgresql package when no server binaries are present (needs root/apt).
# The cluster lives in a temp dir, listens on 127.0.0.1:$PGPORT (a free port by default) and a socket
# there; stop it with: pg_ctl -D "$GPUPOOL_PG_DIR/data" stop
set -euo pipefail
# A free port unless one is given, so a second run (or a leftover server) cannot collide.
PGPORT="${PGPORT:-$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')}"
bin_dir() { ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1; }
if [ -z "$(bin_dir)" ]; then
  echo "postgres.sh: installing postgresql" >&2
  export DEBIAN_FRONTEND=noninteractive
  (apt-get update && apt-get install -y postgresql) >&2
fi
BIN="$(bin_dir)"
[ -n "$BIN" ] || { echo "postgres.sh: no PostgreSQL binaries under /usr/lib/postgresql" >&2; exit 1; }
DIR="$(mktemp -d /tmp/gpupool-pg.XXXXXX)"
RUN_AS=()
if [ "$(id -u)" = "0" ]; then
  chown postgres:postgres "$DIR"
  RUN_AS=(runuser -u postgres --)
fi
"${RUN_AS[@]}" "$BIN/initdb" -D "$DIR/data" -U postgres -A trust --no-sync >&2
"${RUN_AS[@]}" "$BIN/pg_ctl" -D "$DIR/data" -l "$DIR/log" -w \
  -o "-p $PGPORT -k $DIR -c listen_addresses=127.0.0.1 -c fsync=off" start >&2
"${RUN_AS[@]}" "$BIN/createdb" -h 127.0.0.1 -p "$PGPORT" -U postgres gpupool_test >&2
echo "export GPUPOOL_PG_DIR=$DIR"
echo "export GPUPOOL_TEST_PG_URL=postgresql+psycopg://postgres@127.0.0.1:$PGPORT/gpupool_test"
