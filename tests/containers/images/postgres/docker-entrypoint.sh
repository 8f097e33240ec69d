#!/usr/bin/env bash
# The stand-in postgres image's entrypoint: the official image's POSTGRES_* handling.
set -euo pipefail
if [[ "$(id -u)" == 0 ]]; then
    mkdir -p "$PGDATA" /var/run/postgresql
    chown -R postgres:postgres "$PGDATA" /var/run/postgresql
    chmod 700 "$PGDATA"
    exec setpriv --reuid=postgres --regid=postgres --init-groups "$0" "$@"
fi
user="${POSTGRES_USER:-postgres}"
db="${POSTGRES_DB:-$user}"
if [[ ! -s "$PGDATA/PG_VERSION" ]]; then
    : "${POSTGRES_PASSWORD:?POSTGRES_PASSWORD must be set}"
    pwfile="$(mktemp)"
    printf '%s\n' "$POSTGRES_PASSWORD" > "$pwfile"
    initdb -D "$PGDATA" -U "$user" --pwfile="$pwfile" --auth-local=trust \
        --auth-host=scram-sha-256 --encoding=UTF8 --locale=C.UTF-8
    rm -f "$pwfile"
    echo "host all all all scram-sha-256" >> "$PGDATA/pg_hba.conf"
    pg_ctl -D "$PGDATA" -o "-c listen_addresses=''" -w start
    if [[ "$db" != postgres ]]; then
        psql -v ON_ERROR_STOP=1 -U "$user" -d postgres -c "CREATE DATABASE \"$db\""
    fi
    pg_ctl -D "$PGDATA" -m fast -w stop
fi
if [[ "${1:-}" == postgres ]]; then
    shift
    exec postgres -D "$PGDATA" -c listen_addresses='*' "$@"
fi
exec "$@"
