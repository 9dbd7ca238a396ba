#!/usr/bin/env bash
# Install the services the tests start themselves (idempotent; nothing to do when present):
# Debian's redis-server, which the shared chunk-KV tier's tests run on a free loopback port;
# PostgreSQL 15 (initdb and postgres under /usr/lib/postgresql/15/bin), which the shared library's
# tests run as a throwaway cluster; nginx, the front of the replica benchmark.
set -euo pipefail

missing=()
command -v redis-server >/dev/null || missing+=(redis-server)
[ -x /usr/lib/postgresql/15/bin/postgres ] || missing+=(postgresql-15)
command -v nginx >/dev/null || [ -x /usr/sbin/nginx ] || missing+=(nginx)
if [ "${#missing[@]}" = 0 ]; then
  exit 0
fi
if ! command -v apt-get >/dev/null; then
  echo "error: ${missing[*]} missing; install them with your package manager" >&2
  exit 1
fi
sudo=""
if [ "$(id -u)" != 0 ]; then
  command -v sudo >/dev/null || { echo "error: installing ${missing[*]} needs root" >&2; exit 1; }
  sudo="sudo"
fi
echo "Installing ${missing[*]} (for the tests that start them)" >&2
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
