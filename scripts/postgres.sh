#!/usr/bin/env bash
# A real PostgreSQL server for the history tests (tests/e2e/history.rs): Debian's package, a
# cluster of its own on loopback, a role that signs in with a password (as a team's store would).
#
#   scripts/postgres.sh install     idempotent: Debian's postgresql package
#   scripts/postgres.sh start       idempotent: the cluster running; prints its base URL
#   scripts/postgres.sh db NAME     a fresh, empty database NAME (dropped first); prints its URL
#   scripts/postgres.sh stop        stops the cluster (its files stay, for the next start)
#
# The role is `goodput`, its password `goodput-test` (PGPASSWORD): a loopback test fixture, never
# a real credential. Everything lives in $GOODPUT_POSTGRES_DIR (default /var/tmp/goodput-postgres:
# the server refuses to run as root, and its own user cannot read root's home).
set -euo pipefail

DIR="${GOODPUT_POSTGRES_DIR:-/var/tmp/goodput-postgres}"
DATA="$DIR/data"
PASSWORD="goodput-test"

die() {
    echo "postgres: $*" >&2
    exit 1
}

bindir() {
    ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1
}

install() {
    [[ -n "$(bindir)" ]] && return 0
    [[ "$(id -u)" -eq 0 ]] || die "Debian's postgresql package is not installed, and installing it needs root"
    echo "postgres: installing Debian's postgresql package" >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq && apt-get install -y -qq postgresql >/dev/null
    [[ -n "$(bindir)" ]] || die "the postgresql package installed no server binaries"
}

# Runs a server command as the cluster's owner (root cannot run PostgreSQL).
as_owner() {
    if [[ "$(id -u)" -eq 0 ]]; then
        runuser -u postgres -- "$@"
    else
        "$@"
    fi
}

port() {
    cat "$DIR/port"
}

running() {
    [[ -f "$DIR/port" ]] && as_owner "$(bindir)/pg_ctl" -D "$DATA" status >/dev/null 2>&1
}

start() {
    install
    local bin
    bin="$(bindir)"
    if running; then
        echo "postgres://goodput@127.0.0.1:$(port)/goodput"
        return 0
    fi
    mkdir -p "$DIR"
    [[ "$(id -u)" -eq 0 ]] && chown postgres: "$DIR"
    if [[ ! -f "$DATA/PG_VERSION" ]]; then
        as_owner "$bin/initdb" -D "$DATA" -U postgres --auth-local=trust --auth-host=scram-sha-256 >/dev/null
    fi
    python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])' >"$DIR/port"
    as_owner "$bin/pg_ctl" -D "$DATA" -l "$DIR/server.log" -w -t 60 \
        -o "-p $(port) -k $DIR -c listen_addresses=127.0.0.1" start >/dev/null ||
        { cat "$DIR/server.log" >&2; die "the server did not start"; }
    as_owner "$bin/psql" -h "$DIR" -p "$(port)" -U postgres -d postgres -qtA -v ON_ERROR_STOP=1 >/dev/null <<SQL
DO \$\$ BEGIN
  IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'goodput') THEN
    CREATE ROLE goodput LOGIN CREATEDB PASSWORD '$PASSWORD';
  END IF;
END \$\$;
SELECT 'CREATE DATABASE goodput OWNER goodput' WHERE NOT EXISTS (SELECT FROM pg_database WHERE datname = 'goodput')\gexec
SQL
    echo "postgres://goodput@127.0.0.1:$(port)/goodput"
}

db() {
    local name="$1"
    [[ "$name" =~ ^[a-z_][a-z0-9_]*$ ]] || die "database names here are lower-case words: $name"
    start >/dev/null
    as_owner "$(bindir)/psql" -h "$DIR" -p "$(port)" -U postgres -d postgres -qtA -v ON_ERROR_STOP=1 \
        -c "DROP DATABASE IF EXISTS $name WITH (FORCE)" -c "CREATE DATABASE $name OWNER goodput" >/dev/null
    echo "postgres://goodput@127.0.0.1:$(port)/$name"
}

stop() {
    running || return 0
    as_owner "$(bindir)/pg_ctl" -D "$DATA" -m fast -w stop >/dev/null
}

case "${1:-}" in
    install) install ;;
    start) start ;;
    db) db "${2:?usage: scripts/postgres.sh db NAME}" ;;
    stop) stop ;;
    *) die "usage: scripts/postgres.sh install|start|db NAME|stop" ;;
esac
