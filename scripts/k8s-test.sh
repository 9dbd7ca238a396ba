#!/usr/bin/env bash
# Kubernetes deployment test: the Helm chart (deploy/helm/ragblend) installed for real on a
# multi-node cluster this script starts (scripts/k8s-cluster.sh: Kubernetes 1.20 built from
# Debian's source, nodes as network namespaces) and stops by PID at the end. The images are
# the ones scripts/docker-test.sh builds (plus a layer with the test model provisioned, since
# pods reach no network), `docker save`d and imported into each node's containerd. Through the
# Service, with the OpenAI SDK (docker/k8s_check.py, run inside a worker's namespace):
#   - chat with `documents` (the repeat hits every chunk), a document ingested through one pod
#     is cited through the other (shared library), chunks computed on one pod are hits on the
#     other (Redis tier);
#   - `helm upgrade` changing a setting rolls the pods under a request loop: zero failures;
#   - every process of one worker killed by PID: its pod leaves the endpoints, requests fail for
#     no longer than the node grace period, no acknowledged document is lost;
#   - replicaCount 1 -> 2: the new pod serves the library it did not ingest.
# Prints the time of each phase and the figures. All traffic stays inside the cluster's
# namespaces. Without a Docker engine (none answers and none can be started) it says SKIPPED
# and exits 0, as docker-test.sh does.
#   bash scripts/k8s-test.sh [--build-only]
# --build-only: the images, their tars and the cluster's binaries, then stop (no cluster, no
# test); `.ci/run` prepares this way while the test suite runs, so the test itself starts warm.
# Knobs: RAGBLEND_DOCKER_CACHE (/var/cache/ragblend; images saved under <it>/k8s/images),
# RAGBLEND_K8S_GRACE (16 s, the node grace period), RAGBLEND_K8S_TEST_PYTHON (.venv/bin/python),
# RAGBLEND_HELM (default: scripts/install-k8s-tools.sh installs it next to that Python),
# RAGBLEND_K8S_TEST_MODEL (smollm2-135m-instruct), RAGBLEND_K8S_SKIP (comma list of checks to
# skip: upgrade, failover, scale), and those of scripts/k8s-cluster.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
repo="$PWD"

cache="${RAGBLEND_DOCKER_CACHE:-/var/cache/ragblend}"
export RAGBLEND_K8S_CACHE="${RAGBLEND_K8S_CACHE:-$cache/k8s}"
export RAGBLEND_K8S_GRACE="${RAGBLEND_K8S_GRACE:-16}"
export RAGBLEND_K8S_WORKERS="${RAGBLEND_K8S_WORKERS:-2}"
python="${RAGBLEND_K8S_TEST_PYTHON:-$repo/.venv/bin/python}"
model="${RAGBLEND_K8S_TEST_MODEL:-smollm2-135m-instruct}"
skip_checks=",${RAGBLEND_K8S_SKIP:-},"
cluster=(bash "$repo/scripts/k8s-cluster.sh")
release=ragblend
work="$(mktemp -d)"
cluster_started=""
loop_pid=""
figures=()
build_only=""
[ "${1:-}" != "--build-only" ] || build_only=1

test_name=k8s-test
# shellcheck source=scripts/test-common.sh
source "$repo/scripts/test-common.sh"
phase_start=$SECONDS
phase() { # name: prints the time since the previous phase
  figures+=("phase $1: $((SECONDS - phase_start)) s")
  say "phase $1 took $((SECONDS - phase_start)) s"
  phase_start=$SECONDS
}
figure() {
  figures+=("$*")
  say "$*"
}

cleanup() {
  local status=$?
  if [ -n "$loop_pid" ]; then
    kill "$loop_pid" 2>/dev/null && wait "$loop_pid" 2>/dev/null || true
  fi
  if [ -n "$cluster_started" ]; then
    if [ "$status" != 0 ]; then
      kubectl get pods -o wide >&2 || true
      for pod in $(kubectl get pods -o name 2>/dev/null); do
        echo "--- $pod" >&2
        kubectl logs --all-containers --tail 40 "$pod" >&2 || true
      done
    fi
    "${cluster[@]}" stop || true
  fi
  stop_dockerd
  rm -rf "$work"
  echo "k8s-test: figures:" >&2
  printf '  %s\n' "${figures[@]}" >&2
  if [ "$status" != 0 ]; then
    echo "k8s-test: FAILED" >&2
  elif [ -n "$build_only" ]; then
    echo "k8s-test: built (images, their tars, the cluster's binaries)" >&2
  else
    echo "k8s-test: PASSED" >&2
  fi
}
trap cleanup EXIT

[ "$(id -u)" = 0 ] || skip "needs root (network namespaces, containerd)"
[ -n "$build_only" ] || [ -x "$python" ] || {
  say "$python missing: run bash scripts/install.sh dev"
  exit 1
}

# --- images --------------------------------------------------------------------------------


# The test model provisioned into the image (pods cannot pip-install its weights): a container
# of the image docker-test.sh built runs the provisioning, with the host's CA bundle mounted
# for pip only, and is committed. Cached by the base image's ID (a label).
model_image() {
  local base="ragblend:cpu-smoke" image="ragblend:k8s-$model" base_id have
  base_id="$(docker image inspect -f '{{.Id}}' "$base")"
  have="$(docker image inspect -f '{{index .Config.Labels "org.ragblend.k8s.base"}}' "$image" \
    2>/dev/null || true)"
  if [ "$have" != "$base_id" ]; then
    say "provisioning $model into $image (once per base image)"
    local ca="${RAGBLEND_DOCKER_CA_BUNDLE:-${PIP_CERT:-/etc/ssl/certs/ca-certificates.crt}}"
    docker rm -f ragblend-k8s-model >/dev/null 2>&1 || true
    docker run --name ragblend-k8s-model -v "$ca:/run/pip_ca:ro" --entrypoint env "$base" \
      PIP_CERT=/run/pip_ca RAGBLEND_MODELS_DIR=/opt/ragblend/models \
      ragblend models --provision "$model" >&2
    docker commit --change 'ENV RAGBLEND_MODELS_DIR=/opt/ragblend/models' \
      --change "LABEL org.ragblend.k8s.base=$base_id" \
      --change 'ENTRYPOINT ["ragblend-entrypoint"]' \
      --change 'CMD ["ragblend", "serve", "--host", "0.0.0.0", "--port", "8000"]' \
      ragblend-k8s-model "$image" >/dev/null
    docker rm ragblend-k8s-model >/dev/null
  fi
  echo "$image"
}

# `docker save` of each image into the cache, named by image ID (so an unchanged image is not
# saved again); prints the tar paths.
save_images() {
  local dir="$RAGBLEND_K8S_CACHE/images" image id tar
  mkdir -p "$dir"
  for image in "$@"; do
    id="$(docker image inspect -f '{{.Id}}' "$image" | cut -d: -f2 | cut -c1-16)"
    tar="$dir/${image//[:\/]/_}-$id.tar"
    if [ ! -s "$tar" ]; then
      rm -f "$dir/${image//[:\/]/_}-"*.tar
      say "docker save $image"
      docker save -o "$tar.tmp" "$image"
      mv "$tar.tmp" "$tar"
    fi
    echo "$tar"
  done
}

command -v docker >/dev/null || {
  { apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q docker.io; } >&2 \
    || skip "could not install docker.io"
}
start_dockerd "$cache/dockerd-k8s.log"
bash scripts/docker-test.sh --build-only
phase "images built (docker-test.sh --build-only)"
server_image="$(model_image)"
mapfile -t tars < <(save_images "$server_image" ragblend-postgres:15 ragblend-redis:7)
phase "model image and docker save"
stop_dockerd # its memory is the cluster's now
if [ -n "$build_only" ]; then
  "${cluster[@]}" prepare
  phase "cluster binaries (cached by source checksum) and packages"
  exit 0
fi

# --- tools and cluster ---------------------------------------------------------------------

helm_bin="${RAGBLEND_HELM:-}"
if [ -z "$helm_bin" ] && [ -f scripts/install-k8s-tools.sh ]; then
  bash scripts/install-k8s-tools.sh "$(dirname "$python")" >&2 # next to the test's Python
  helm_bin="$(dirname "$python")/helm"
fi
helm_bin="${helm_bin:-$(command -v helm || true)}"
[ -x "$helm_bin" ] || {
  say "no helm ($helm_bin): run bash scripts/install-k8s-tools.sh"
  exit 1
}

cluster_started=1
"${cluster[@]}" start
phase "cluster start (build cached or not; see above)"
eval "$("${cluster[@]}" env)"
export KUBECONFIG
kubectl() { "$RAGBLEND_K8S_KUBECTL" "$@"; }
helm() { ip netns exec "$RAGBLEND_K8S_CONTROL_PLANE" "$helm_bin" --kubeconfig "$KUBECONFIG" "$@"; }
run_dir="$(dirname "$KUBECONFIG")"
worker_ns() { eval "echo \"\$RAGBLEND_K8S_WORKER_$1\""; }

import_pids=()
for ((i = 1; i <= RAGBLEND_K8S_WORKERS; i++)); do
  (for tar in "${tars[@]}"; do
    ctr -a "$run_dir/w$i/containerd.sock" -n k8s.io images import "$tar" >/dev/null
  done) &
  import_pids+=($!)
done
for pid in "${import_pids[@]}"; do wait "$pid"; done
phase "image import ($RAGBLEND_K8S_WORKERS nodes in parallel)"

# PostgreSQL's claim binds to a local volume on worker 1 (no storage provisioner in this
# cluster), and Redis is pinned there too: the stores stay on the node the failover check does
# not kill, which then tests the server pods' failover alone.
mkdir -p "$run_dir/volumes/postgres"
kubectl apply -f - >&2 <<EOF
apiVersion: v1
kind: PersistentVolume
metadata: {name: ragblend-k8s-test-postgres}
spec:
  capacity: {storage: 2Gi}
  accessModes: [ReadWriteOnce]
  persistentVolumeReclaimPolicy: Delete
  local: {path: "$run_dir/volumes/postgres"}
  nodeAffinity:
    required:
      nodeSelectorTerms:
        - matchExpressions: [{key: kubernetes.io/hostname, operator: In, values: [w1]}]
EOF

api_key="k8s-$(openssl rand -hex 12)"
# CHUNK_CACHE_RECOMPUTE_WHEN_FASTER=false: a chunk of this small model computes faster than it
# loads across the pod network, and the pods would rightly compute it; the checks are about what
# Redis shares.
values=(
  --set "image.repository=${server_image%%:*}" --set "image.tag=${server_image#*:}"
  --set image.pullPolicy=Never --set postgresql.image.pullPolicy=Never
  --set redis.image.pullPolicy=Never
  --set replicaCount=2 --set "apiKeys={$api_key}"
  --set "settings.MODEL=$model" --set settings.KV_CACHE_GIB=1
  --set settings.CHUNK_CACHE_MEMORY_GIB=1 --set settings.CHUNK_CACHE_DISK_GIB=1
  --set settings.SHUTDOWN_TIMEOUT=14
  --set settings.CHUNK_CACHE_RECOMPUTE_WHEN_FASTER=false
  --set sizing.baseMemoryGiB=3 --set sizing.cpu=200m --set sizing.modelDiskGiB=3
  --set postgresql.enabled=true --set postgresql.persistence.size=2Gi
  --set redis.enabled=true --set redis.maxmemory=256mb
  --set 'redis.nodeSelector.kubernetes\.io/hostname=w1'
)
helm install "$release" deploy/helm/ragblend "${values[@]}" --wait --timeout 20m >&2
phase "helm install --wait (2 replicas, PostgreSQL, Redis) to ready"
kubectl get pods -o wide >&2

server_pods() { # "name ip node" of each running server pod that is not being deleted
  kubectl get pods -l "app.kubernetes.io/instance=$release,app.kubernetes.io/component=server" \
    -o jsonpath='{range .items[*]}{.metadata.name} {.status.podIP} {.spec.nodeName} {.status.phase} {.metadata.deletionTimestamp}{"\n"}{end}' \
    | awk 'NF == 4 && $4 == "Running" {print $1, $2, $3}'
}
service_ip="$(kubectl get service "$release" -o jsonpath='{.spec.clusterIP}')"
service_port="$(kubectl get service "$release" -o jsonpath='{.spec.ports[0].port}')"
url="http://$service_ip:$service_port"
client_ns="$(worker_ns 1)" # the failover check kills another worker
check() {
  ip netns exec "$client_ns" "$python" docker/k8s_check.py "$@" --url "$url" --api-key "$api_key"
}
pod_urls() { server_pods | awk '{printf "--pod\nhttp://%s:8000\n", $2}'; }
mapfile -t pods < <(pod_urls)
[ "${#pods[@]}" = 4 ] || { say "expected 2 running server pods: $(server_pods)"; exit 1; }
say "Service $url; pods: ${pods[*]}"
check ready "${pods[@]}" >&2
served="$(check serve "${pods[@]}")"
say "through the Service and across pods: $served"
phase "chat, shared library and Redis checks"

start_loop() { # loop arguments...
  rm -f "$work/stop"
  ip netns exec "$client_ns" "$python" docker/k8s_check.py loop --url "$url" \
    --api-key "$api_key" --stop-file "$work/stop" --max-seconds 900 "$@" >"$work/loop.json" &
  loop_pid=$!
}
stop_loop() { # sets loop_result (not run in $(...): a subshell cannot wait for the loop)
  touch "$work/stop"
  local status=0
  wait "$loop_pid" || status=$?
  loop_pid=""
  loop_result="$(cat "$work/loop.json")"
  [ "$status" = 0 ] || { say "the request loop failed (exit status $status)"; exit 1; }
}
json() { "$python" -c 'import json, sys; print(json.loads(sys.argv[1])[sys.argv[2]])' "$@"; }

if [[ "$skip_checks" != *,upgrade,* ]]; then
  say "rolling upgrade (settings.MAX_TOKENS_DEFAULT) under a request loop"
  # 120 s a request: the test asks that no request fails, not how fast one is answered while a
  # third engine starts on the same 2 shared cores; one 4-token chat has taken 19, 40 and 55 s
  # there (the figure below reports the slowest). The OpenAI SDK's own default is 600 s.
  start_loop --ids-file "$work/upgrade-ids" --request-timeout 120
  sleep 5
  before="$(server_pods | awk '{print $1}' | sort | paste -sd' ')"
  helm upgrade "$release" deploy/helm/ragblend --reuse-values \
    --set settings.MAX_TOKENS_DEFAULT=200 --wait --timeout 20m >&2
  sleep 5
  stop_loop
  upgraded="$loop_result"
  after="$(server_pods | awk '{print $1}' | sort | paste -sd' ')"
  say "loop during the upgrade: $upgraded (pods $before -> $after)"
  [ "$before" != "$after" ] || { say "helm upgrade did not roll the pods"; exit 1; }
  figure "rolling upgrade: $(json "$upgraded" failed) failed of $(json "$upgraded" requests) requests (p50 $(json "$upgraded" request_p50_s) s, slowest $(json "$upgraded" request_max_s) s)"
  [ "$(json "$upgraded" failed)" = 0 ] || { say "requests failed during the rolling upgrade"; exit 1; }
  check documents --ids-file "$work/upgrade-ids" >&2
  phase "rolling upgrade under load"
fi

if [[ "$skip_checks" != *,failover,* ]]; then
  # The victim: a worker with a server pod, other than worker 1 (PostgreSQL and Redis).
  victim="$(server_pods | awk '$3 != "w1" {print $3}' | head -1)"
  [ -n "$victim" ] || { say "no server pod off w1: $(server_pods)"; exit 1; }
  victim_ip="$(server_pods | awk -v n="$victim" '$3 == n {print $2}')"
  say "failover: killing every process of $victim (its server pod $victim_ip) under a request loop"
  start_loop --ids-file "$work/failover-ids" --mark-file "$work/mark" --request-timeout 10
  sleep 8
  date +%s.%N >"$work/mark"
  killed_at=$SECONDS
  "${cluster[@]}" kill-node "${victim#w}"
  endpoint_gone=""
  for _ in $(seq 240); do
    addresses="$(kubectl get endpoints "$release" -o jsonpath='{.subsets[*].addresses[*].ip}')"
    if [[ " $addresses " != *" $victim_ip "* ]]; then
      endpoint_gone=$((SECONDS - killed_at))
      break
    fi
    sleep 0.5
  done
  [ -n "$endpoint_gone" ] || { say "$victim_ip never left the endpoints"; exit 1; }
  sleep 20 # requests keep going on the surviving pod
  stop_loop
  failover="$loop_result"
  say "loop during the failover: $failover"
  kubectl get nodes >&2
  figure "node kill: pod left the endpoints ${endpoint_gone} s after the kill (grace period ${RAGBLEND_K8S_GRACE} s)"
  figure "node kill: $(json "$failover" failed_after_mark) requests failed, for $(json "$failover" failing_seconds_after_mark) s; all succeed from $(json "$failover" all_succeed_from_s 2>/dev/null || echo 0) s"
  "$python" - "$failover" "$RAGBLEND_K8S_GRACE" <<'EOF'
import json, sys
result, grace = json.loads(sys.argv[1]), float(sys.argv[2])
if result["failing_seconds_after_mark"] > grace + 5:
    sys.exit(f"requests failed {result['failing_seconds_after_mark']} s after the kill (grace {grace} s)")
EOF
  check documents --ids-file "$work/failover-ids" >&2
  figure "node kill: $(json "$failover" documents_acknowledged) acknowledged documents, none lost"
  phase "node kill and failover"
fi

if [[ "$skip_checks" != *,scale,* ]]; then
  say "scaling: replicaCount 1, ingest, replicaCount 2: the new pod serves that library"
  helm upgrade "$release" deploy/helm/ragblend --reuse-values --set replicaCount=1 \
    --wait --timeout 10m >&2
  old="$(server_pods | awk '{print $1}')"
  check ingest >&2
  scale_start=$SECONDS
  helm upgrade "$release" deploy/helm/ragblend --reuse-values --set replicaCount=2 \
    --wait --timeout 20m >&2
  figure "scale 1 -> 2: ready in $((SECONDS - scale_start)) s"
  new_ip="$(server_pods | awk -v old="$old" '$1 != old {print $2}' | head -1)"
  [ -n "$new_ip" ] || { say "no new server pod: $(server_pods)"; exit 1; }
  check cited --pod "http://$new_ip:8000" >&2
  figure "scale 1 -> 2: the new pod ($new_ip) cites the document ingested before it existed"
  phase "scale 1 -> 2"
fi
