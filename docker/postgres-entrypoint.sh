#!/bin/sh
# The PostgreSQL image's entrypoint (docker/Dockerfile.services): on the first start, makes the
# cluster in the volume ($PGDATA) with the role and database `ragblend`, whose password is
# RAGBLEND_POSTGRES_PASSWORD, and lets the compose network in with that password; then runs
# `postgres` in the foreground, listening on every interface of the container.
set -eu

if [ ! -s "$PGDATA/PG_VERSION" ]; then
  if [ -z "${RAGBLEND_POSTGRES_PASSWORD:-}" ]; then
    echo "postgres: set RAGBLEND_POSTGRES_PASSWORD (e.g. openssl rand -hex 16)" >&2
    exit 64
  fi
  password_file="$(mktemp)"
  printf '%s\n' "$RAGBLEND_POSTGRES_PASSWORD" >"$password_file"
  initdb --pgdata="$PGDATA" --username=ragblend --pwfile="$password_file" \
    --auth-local=trust --auth-host=scram-sha-256 --encoding=UTF8 --locale=C.UTF-8 >&2
  rm -f "$password_file"
  echo "host all all all scram-sha-256" >>"$PGDATA/pg_hba.conf"
  echo "CREATE DATABASE ragblend;" | postgres --single -D "$PGDATA" postgres >/dev/null
fi
exec postgres -D "$PGDATA" -c listen_addresses='*' -c unix_socket_directories=/tmp "$@"
