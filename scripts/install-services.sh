#!/usr/bin/env bash
# Install the services the tests start themselves (idempotent; nothing to do when present):
# Debian's redis-server, which the shared chunk-KV tier's tests run on a free loopback port.
set -euo pipefail

if command -v redis-server >/dev/null; then
  exit 0
fi
if ! command -v apt-get >/dev/null; then
  echo "error: redis-server is missing; install it with your package manager" >&2
  exit 1
fi
sudo=""
if [ "$(id -u)" != 0 ]; then
  command -v sudo >/dev/null || { echo "error: installing redis-server needs root" >&2; exit 1; }
  sudo="sudo"
fi
echo "Installing redis-server (for the Redis chunk-KV tier's tests)" >&2
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends redis-server >/dev/null
