#!/bin/sh
# The image's entrypoint: refuses to serve without an API key (or a non-empty key file) when
# compose publishes the port beyond the host's loopback (RAGBLEND_PUBLISHED_ON, set by
# compose.yaml from RAGBLEND_BIND), then execs the command, so the server itself receives Docker's stop signal.
set -eu

case "${RAGBLEND_PUBLISHED_ON:-127.0.0.1}" in
  127.0.0.1 | localhost | ::1 | "[::1]") ;;
  *)
    if [ -z "${RAGBLEND_API_KEYS:-}" ] && [ ! -s "${RAGBLEND_API_KEYS_FILE:-/nonexistent}" ]; then
      echo "ragblend: refusing to serve on ${RAGBLEND_PUBLISHED_ON} without an API key:" \
        "set RAGBLEND_API_KEYS or RAGBLEND_API_KEYS_FILE (a non-empty file in the container)," \
        "or leave RAGBLEND_BIND unset to publish on 127.0.0.1 only" >&2
      exit 64
    fi
    ;;
esac
exec "$@"
