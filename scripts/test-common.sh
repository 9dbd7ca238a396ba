# shellcheck shell=bash
# Sourced by docker-test.sh and k8s-test.sh after setting `test_name`: their messages, and a
# Docker engine for the test, started only when none answers (Debian's docker.io installed if
# missing) and stopped again by the PID it started.
#   say MESSAGE         # "<test_name>: MESSAGE" on stderr
#   skip REASON         # a loud SKIPPED, exit 0
#   start_dockerd LOG   # no engine and none can be started: skip
#   stop_dockerd        # only the one start_dockerd started; a no-op otherwise
started_dockerd=""

say() { echo "$test_name: $*" >&2; }
skip() {
  echo "=================================================================" >&2
  echo "$test_name: SKIPPED: $*" >&2
  echo "=================================================================" >&2
  exit 0
}

start_dockerd() {
  local log="$1"
  docker info >/dev/null 2>&1 && return 0
  [ "$(id -u)" = 0 ] || skip "no Docker engine answers and this user cannot start dockerd"
  if ! command -v dockerd >/dev/null; then
    say "installing Debian's docker.io"
    { apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q docker.io; } >&2 \
      || skip "could not install docker.io"
  fi
  say "starting dockerd (log: $log)"
  dockerd >"$log" 2>&1 &
  started_dockerd=$!
  for _ in $(seq 60); do
    docker info >/dev/null 2>&1 && return 0
    kill -0 "$started_dockerd" 2>/dev/null || break
    sleep 1
  done
  tail -20 "$log" >&2 || true
  skip "dockerd did not start (see $log)"
}

stop_dockerd() {
  [ -n "$started_dockerd" ] || return 0
  say "stopping the dockerd this test started (PID $started_dockerd)"
  kill "$started_dockerd" 2>/dev/null && wait "$started_dockerd" 2>/dev/null || true
  started_dockerd=""
}
