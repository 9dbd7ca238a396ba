#!/usr/bin/env bash
# A real multi-node Kubernetes cluster on one machine, for the chart's deployment test
# (scripts/k8s-test.sh). No registry here ships kind/k3s images or kubelet packages, so it is
# built from Debian's own kubernetes source package (bookworm, v1.20.2) and every "host" is a
# network namespace: one control plane (etcd, kube-apiserver, controller-manager, scheduler)
# and N workers (each its own containerd + runc, kubelet, iptables kube-proxy, CNI bridge),
# joined by a bridge in a namespace of its own, with static routes between the pod ranges.
# All cluster traffic stays inside those namespaces; nothing in the host's root namespace
# changes (no interface, route or iptables rule there).
#   bash scripts/k8s-cluster.sh build        # the binaries, cached by the source's checksum
#   bash scripts/k8s-cluster.sh prepare      # build, and install the nodes' Debian packages
#   bash scripts/k8s-cluster.sh start        # build if needed, start, wait for nodes Ready
#   bash scripts/k8s-cluster.sh stop         # stop every process it started, by PID; clean up
#   bash scripts/k8s-cluster.sh kill-node N  # SIGKILL every process of worker N (failover test)
#   bash scripts/k8s-cluster.sh env          # prints KUBECONFIG=... and the namespace names
# `start` records each PID in $RAGBLEND_K8S_RUN/pids; `stop` (also run when `start` fails)
# kills exactly those, then removes the namespaces, mounts and state it made. State left by a
# cluster whose processes are all gone (a machine that restarted mid-test) is cleaned up by `start`.
# Knobs: RAGBLEND_K8S_CACHE (/var/cache/ragblend/k8s: source, binaries, per-checksum),
# RAGBLEND_K8S_RUN (/var/lib/ragblend-k8s: state of the running cluster, images included), RAGBLEND_K8S_WORKERS
# (2), RAGBLEND_K8S_GRACE (16: controller-manager's --node-monitor-grace-period, seconds),
# RAGBLEND_K8S_NET (10.77: the first two octets of every address the cluster uses),
# RAGBLEND_DEBIAN_MIRROR (http://deb.debian.org/debian, for the deb-src line).
set -euo pipefail
cd "$(dirname "$0")/.."

cache="${RAGBLEND_K8S_CACHE:-/var/cache/ragblend/k8s}"
run="${RAGBLEND_K8S_RUN:-/var/lib/ragblend-k8s}"
workers="${RAGBLEND_K8S_WORKERS:-2}"
grace="${RAGBLEND_K8S_GRACE:-16}"
net="${RAGBLEND_K8S_NET:-10.77}"
mirror="${RAGBLEND_DEBIAN_MIRROR:-http://deb.debian.org/debian}"
go_root=/usr/lib/go-1.19
binaries=(kube-apiserver kube-controller-manager kube-scheduler kubelet kube-proxy kubectl)
# Addresses: the hosts' bridge $net.0.0/24 (.1 control plane, .10+N worker N), pods of worker N
# in $net.(N+1).0/24 (node N's podCIDR), services in $net.200.0/24.
service_cidr="$net.200.0/24"
cp_ip="$net.0.1"
prefix="rbk8s" # namespace and interface names: ${prefix}-cp, ${prefix}-w1.., ${prefix}-br

say() { echo "k8s-cluster: $*" >&2; }
die() {
  say "$*"
  exit 1
}

apt_install() {
  local missing=()
  for package in "$@"; do
    dpkg -s "$package" >/dev/null 2>&1 || missing+=("$package")
  done
  [ "${#missing[@]}" = 0 ] && return 0
  [ "$(id -u)" = 0 ] || die "needs root to install ${missing[*]}"
  say "installing Debian's ${missing[*]}"
  { apt-get update -q && DEBIAN_FRONTEND=noninteractive \
    apt-get install -y -q --no-install-recommends "${missing[@]}"; } >&2
}

# --- build -----------------------------------------------------------------------------------

# The source package through an apt configuration of its own (a deb-src line the machine's
# sources may lack); prints the .dsc path. apt checks every file against the signed index.
fetch_source() {
  local dir="$cache/source"
  mkdir -p "$dir/lists/partial"
  echo "deb-src $mirror bookworm main" >"$dir/sources.list"
  local options=(-o "Dir::Etc::SourceList=$dir/sources.list" -o Dir::Etc::SourceParts=/dev/null
    -o "Dir::State::Lists=$dir/lists" -o APT::Sandbox::User=root)
  if ! ls "$dir"/kubernetes_*.dsc >/dev/null 2>&1; then
    say "apt-get source --download-only kubernetes (bookworm)"
    apt-get "${options[@]}" update -q >&2
    (cd "$dir" && apt-get "${options[@]}" source --download-only kubernetes >&2)
  fi
  ls "$dir"/kubernetes_*.dsc | tail -1
}

# Binaries for one source checksum: $cache/<sha>/bin. Prints that directory.
build() {
  apt_install dpkg-dev golang-1.19-go golang-1.19-src golang-github-modern-go-reflect2-dev \
    gcc libc6-dev
  local dsc sum out
  dsc="$(fetch_source)"
  sum="$(sha256sum "$dsc" | cut -c1-16)"
  out="$cache/$sum"
  if [ -x "$out/bin/kubelet" ] && [ -x "$out/bin/pause" ]; then
    echo "$out"
    return 0
  fi
  local start tmp
  start=$(date +%s)
  tmp="$(mktemp -d "$cache/build.XXXXXX")"
  # shellcheck disable=SC2064 # the directory is known now
  trap "rm -rf '$tmp'" RETURN
  say "building Kubernetes from $(basename "$dsc") into $out (cold: about 6 min on 2 cores)"
  dpkg-source -x "$dsc" "$tmp/kubernetes" >/dev/null
  local tree="$tmp/gopath/src/k8s.io/kubernetes"
  mkdir -p "$(dirname "$tree")"
  mv "$tmp/kubernetes" "$tree"
  # The vendored reflect2 1.0.1 makes the apiserver write malformed JSON under Go >= 1.18;
  # Debian's 1.0.2 does not.
  rm -rf "$tree/vendor/github.com/modern-go/reflect2"
  cp -r /usr/share/gocode/src/github.com/modern-go/reflect2 "$tree/vendor/github.com/modern-go/"
  export GOPATH="$tmp/gopath" GOCACHE="$tmp/gocache" GO111MODULE=off GOPROXY=off GOFLAGS=
  export CGO_ENABLED=0 PATH="$go_root/bin:$PATH"
  (
    cd "$tree"
    # pkg/generated/openapi is not in the tarball: the Makefile generates it from every package
    # tagged +k8s:openapi-gen= (staging/src seen as vendor/, as hack/ names them).
    go build -o "$tmp/openapi-gen" ./vendor/k8s.io/kube-openapi/cmd/openapi-gen
    local dirs
    dirs="$(find -H . \( -path ./_\* -o -path ./.\* -o -path ./vendor -o -path ./debian \) -prune \
      -o -type f -name '*.go' -print0 | xargs -0 grep -l '^// *+k8s:openapi-gen=' \
      | sed 's|^\./staging/src|vendor|; s|^\./||; s|/[^/]*$||' \
      | grep -v -e '^vendor/k8s.io/code-generator/' -e '^vendor/k8s.io/sample-apiserver/' \
      | LC_ALL=C sort -u | sed 's|^|k8s.io/kubernetes/|' | paste -sd,)"
    "$tmp/openapi-gen" -i "$dirs" -p k8s.io/kubernetes/pkg/generated/openapi \
      -O zz_generated.openapi -h vendor/k8s.io/code-generator/hack/boilerplate.go.txt \
      -r "$tmp/violations.report" >&2
    local v=k8s.io/kubernetes/vendor/k8s.io/component-base/version
    local c=k8s.io/kubernetes/vendor/k8s.io/client-go/pkg/version
    local ldflags="-s -w"
    for pkg in "$v" "$c"; do
      ldflags+=" -X $pkg.gitVersion=v1.20.2 -X $pkg.gitMajor=1 -X $pkg.gitMinor=20"
      ldflags+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=$(date -u +%Y-%m-%dT%H:%M:%SZ)"
    done
    mkdir -p "$tmp/bin"
    for binary in "${binaries[@]}"; do
      say "go build $binary"
      go build -ldflags "$ldflags" -o "$tmp/bin/$binary" "./cmd/$binary"
    done
    # The sandbox image's one process, from the same tree.
    gcc -Os -static -DVERSION=v3.4-ragblend -o "$tmp/bin/pause" build/pause/linux/pause.c
  )
  rm -rf "$out"
  mkdir -p "$out"
  mv "$tmp/bin" "$out/bin"
  say "built in $(($(date +%s) - start)) s: $(du -sh "$out/bin" | cut -f1) in $out/bin"
  echo "$out"
}

# --- the cluster --------------------------------------------------------------------------

ns_cp="$prefix-cp"
ns_br="$prefix-br"
worker_ns() { echo "$prefix-w$1"; }
worker_ip() { echo "$net.0.$((10 + $1))"; }
worker_pods() { echo "$net.$(($1 + 1)).0/24"; }
# cgroup v1 controllers the kubelets use; every process of worker N lives under rbk8s-wN in each.
cgroup_controllers=(cpu cpuacct cpuset memory devices freezer blkio pids systemd)
pause_image="localhost/ragblend-pause:1.20.2"

# Starts "$@" in network namespace $1 (and, for a worker, in its pids cgroup, so the shims and
# containers it starts are found again), logs to $run/log/<name>.log, records name and PID.
# nsenter --net, not `ip netns exec`: that one also makes a mount namespace with a fresh /sys,
# where the kubelet finds no cgroup mounts and the host would not see the pods' mounts.
launch() {
  local ns="$1" name="$2" cgroup="$3"
  shift 3
  local log="$run/log/$name.log"
  if [ -n "$cgroup" ]; then
    # shellcheck disable=SC2016 # $$ is the inner shell's PID, which exec keeps
    setsid sh -c 'echo $$ >"$1/cgroup.procs"; shift; exec "$@"' launch "$cgroup" \
      nsenter --net="/run/netns/$ns" "$@" </dev/null >"$log" 2>&1 &
  else
    setsid nsenter --net="/run/netns/$ns" "$@" </dev/null >"$log" 2>&1 &
  fi
  echo "$name $!" >>"$run/pids"
}

wait_for() {
  local what="$1" seconds="$2"
  shift 2
  local i
  for ((i = 0; i < seconds * 2; i++)); do
    "$@" >/dev/null 2>&1 && return 0
    sleep 0.5
  done
  die "$what not ready after $seconds s (logs in $run/log)"
}

kubeconfig() { # user token -> file
  cat <<EOF
apiVersion: v1
kind: Config
clusters:
- name: ragblend
  cluster: {server: "https://$cp_ip:6443", certificate-authority: "$run/pki/ca.crt"}
users:
- name: $1
  user: {token: "$2"}
contexts:
- name: ragblend
  context: {cluster: ragblend, user: $1, namespace: default}
current-context: ragblend
EOF
}

# A docker-archive tar of the pause image, imported into each node's containerd.
pause_tar() {
  local dir="$run/pause"
  mkdir -p "$dir/root"
  cp "$bin/pause" "$dir/root/pause"
  tar -C "$dir/root" --owner=0 --group=0 --mtime=@0 -cf "$dir/layer.tar" pause
  local diff_id
  diff_id="$(sha256sum "$dir/layer.tar" | cut -d' ' -f1)"
  printf '%s' '{"architecture":"amd64","os":"linux","config":{"Entrypoint":["/pause"]},' \
    '"rootfs":{"type":"layers","diff_ids":["sha256:'"$diff_id"'"]}}' >"$dir/config.json"
  printf '%s' '[{"Config":"config.json","RepoTags":["'"$pause_image"'"],' \
    '"Layers":["layer.tar"]}]' >"$dir/manifest.json"
  tar -C "$dir" -cf "$dir/pause.tar" manifest.json config.json layer.tar
  echo "$dir/pause.tar"
}

start_control_plane() {
  local pki="$run/pki"
  mkdir -p "$pki" "$run/cp"
  openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=ragblend-k8s-ca \
    -keyout "$pki/ca.key" -out "$pki/ca.crt" 2>/dev/null
  openssl req -newkey rsa:2048 -nodes -subj /CN=kube-apiserver -keyout "$pki/apiserver.key" \
    -out "$pki/apiserver.csr" 2>/dev/null
  printf 'subjectAltName=IP:%s,IP:127.0.0.1,IP:%s,DNS:kubernetes,DNS:kubernetes.default\n' \
    "$cp_ip" "${service_cidr%.0/24}.1" >"$pki/san.ext"
  openssl x509 -req -in "$pki/apiserver.csr" -CA "$pki/ca.crt" -CAkey "$pki/ca.key" \
    -CAcreateserial -days 2 -extfile "$pki/san.ext" -out "$pki/apiserver.crt" 2>/dev/null
  openssl genrsa -out "$pki/sa.key" 2048 2>/dev/null
  openssl rsa -in "$pki/sa.key" -pubout -out "$pki/sa.pub" 2>/dev/null
  # Static tokens: one identity per component, the names the default RBAC roles bind.
  local admin cm sched proxy i t
  admin="$(openssl rand -hex 16)" cm="$(openssl rand -hex 16)"
  sched="$(openssl rand -hex 16)" proxy="$(openssl rand -hex 16)"
  {
    echo "$admin,admin,admin,system:masters"
    echo "$cm,system:kube-controller-manager,cm"
    echo "$sched,system:kube-scheduler,sched"
    echo "$proxy,system:kube-proxy,proxy"
  } >"$pki/tokens.csv"
  for ((i = 1; i <= workers; i++)); do
    t="$(openssl rand -hex 16)"
    echo "$t,system:node:w$i,node-w$i,system:nodes" >>"$pki/tokens.csv"
    kubeconfig "system:node:w$i" "$t" >"$run/w$i.kubeconfig"
  done
  kubeconfig admin "$admin" >"$run/admin.kubeconfig"
  kubeconfig system:kube-controller-manager "$cm" >"$run/cm.kubeconfig"
  kubeconfig system:kube-scheduler "$sched" >"$run/sched.kubeconfig"
  kubeconfig system:kube-proxy "$proxy" >"$run/proxy.kubeconfig"
  chmod 600 "$pki"/*.key "$pki/tokens.csv" "$run"/*.kubeconfig

  launch "$ns_cp" etcd "" etcd --name cp --data-dir "$run/cp/etcd" \
    --listen-client-urls http://127.0.0.1:2379 --advertise-client-urls http://127.0.0.1:2379 \
    --listen-peer-urls http://127.0.0.1:2380 --initial-advertise-peer-urls http://127.0.0.1:2380 \
    --initial-cluster cp=http://127.0.0.1:2380 --listen-metrics-urls http://127.0.0.1:2381
  launch "$ns_cp" kube-apiserver "" "$bin/kube-apiserver" --etcd-servers=http://127.0.0.1:2379 \
    --bind-address=0.0.0.0 --advertise-address="$cp_ip" --secure-port=6443 --insecure-port=0 \
    --tls-cert-file="$pki/apiserver.crt" --tls-private-key-file="$pki/apiserver.key" \
    --token-auth-file="$pki/tokens.csv" --authorization-mode=Node,RBAC \
    --enable-admission-plugins=NodeRestriction --allow-privileged=true \
    --service-cluster-ip-range="$service_cidr" --service-account-key-file="$pki/sa.pub" \
    --service-account-signing-key-file="$pki/sa.key" \
    --service-account-issuer=https://kubernetes.default.svc \
    --api-audiences=https://kubernetes.default.svc --cert-dir="$run/cp/apiserver" \
    --kubelet-preferred-address-types=InternalIP --profiling=false --v=1
  local start_api=$SECONDS
  wait_for "kube-apiserver" 90 ip netns exec "$ns_cp" curl -sfk \
    -H "Authorization: Bearer $admin" "https://$cp_ip:6443/readyz"
  say "kube-apiserver ready in $((SECONDS - start_api)) s"
  launch "$ns_cp" kube-controller-manager "" "$bin/kube-controller-manager" \
    --kubeconfig="$run/cm.kubeconfig" --use-service-account-credentials=true \
    --service-account-private-key-file="$pki/sa.key" --root-ca-file="$pki/ca.crt" \
    --node-monitor-grace-period="${grace}s" --node-monitor-period=2s --leader-elect=false \
    --port=0 --bind-address=127.0.0.1 --profiling=false --v=1
  launch "$ns_cp" kube-scheduler "" "$bin/kube-scheduler" --kubeconfig="$run/sched.kubeconfig" \
    --leader-elect=false --port=0 --bind-address=127.0.0.1 --profiling=false --v=1
}

make_cgroups() { # worker -> the pids cgroup its daemons start in
  local w="$1" controller dir
  for controller in "${cgroup_controllers[@]}"; do
    dir="/sys/fs/cgroup/$controller/$prefix-w$w"
    mkdir -p "$dir"
    if [ "$controller" = cpuset ]; then
      cat /sys/fs/cgroup/cpuset/cpuset.cpus >"$dir/cpuset.cpus"
      cat /sys/fs/cgroup/cpuset/cpuset.mems >"$dir/cpuset.mems"
    fi
  done
  mkdir -p "/sys/fs/cgroup/pids/$prefix-w$w/daemons"
  echo "/sys/fs/cgroup/pids/$prefix-w$w/daemons"
}

start_worker() {
  local w="$1" ns ip pods dir cgroup
  ns="$(worker_ns "$w")" ip="$(worker_ip "$w")" pods="$(worker_pods "$w")" dir="$run/w$w"
  mkdir -p "$dir/cni" "$dir/containerd"
  cgroup="$(make_cgroups "$w")"
  cat >"$dir/cni/10-ragblend.conflist" <<EOF
{"cniVersion": "0.4.0", "name": "ragblend", "plugins": [
  {"type": "bridge", "bridge": "cni0", "isGateway": true, "ipMasq": false, "hairpinMode": true,
   "ipam": {"type": "host-local", "dataDir": "$dir/cni-ipam",
            "ranges": [[{"subnet": "$pods"}]], "routes": [{"dst": "0.0.0.0/0"}]}},
  {"type": "portmap", "capabilities": {"portMappings": true}}]}
EOF
  # restrict_oom_score_adj: these VMs deny CAP_SYS_RESOURCE, without which runc cannot lower a
  # container's oom_score_adj below its own ("can't get final child's PID from pipe").
  cat >"$dir/containerd.toml" <<EOF
version = 2
root = "$dir/containerd/root"
state = "$dir/containerd/state"
[grpc]
  address = "$dir/containerd.sock"
[ttrpc]
  address = "$dir/containerd.sock.ttrpc"
[metrics]
  address = ""
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "$pause_image"
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "$dir/cni"
EOF
  launch "$ns" "w$w-containerd" "$cgroup" containerd --config "$dir/containerd.toml"
  wait_for "containerd of w$w" 30 ctr -a "$dir/containerd.sock" version
  ctr -a "$dir/containerd.sock" -n k8s.io images import "$pause_tar" >/dev/null
  launch "$ns" "w$w-kubelet" "$cgroup" "$bin/kubelet" --kubeconfig="$run/w$w.kubeconfig" \
    --hostname-override="w$w" --node-ip="$ip" --address="$ip" --read-only-port=0 \
    --container-runtime=remote --container-runtime-endpoint="unix://$dir/containerd.sock" \
    --runtime-request-timeout=10m --root-dir="$dir/kubelet" --cert-dir="$dir/kubelet-pki" \
    --cgroup-driver=cgroupfs --cgroup-root="/$prefix-w$w" --fail-swap-on=false \
    --pod-infra-container-image="$pause_image" --anonymous-auth=true \
    --authorization-mode=AlwaysAllow --node-status-update-frequency=4s \
    --eviction-hard='memory.available<100Mi,nodefs.available<1%,imagefs.available<1%' \
    --image-gc-high-threshold=100 --image-gc-low-threshold=99 --max-pods=30 \
    --volume-plugin-dir="$dir/volume-plugins" --resolv-conf=/etc/resolv.conf \
    --serialize-image-pulls=false --v=1
  # --masquerade-all: service traffic leaves through the node's address, so that a reply from
  # a pod on the same bridge comes back through the node's NAT.
  launch "$ns" "w$w-kube-proxy" "$cgroup" "$bin/kube-proxy" --kubeconfig="$run/proxy.kubeconfig" \
    --hostname-override="w$w" --bind-address="$ip" --proxy-mode=iptables --masquerade-all \
    --cluster-cidr="$net.0.0/16" --conntrack-max-per-core=0 \
    --conntrack-tcp-timeout-established=0 --conntrack-tcp-timeout-close-wait=0 \
    --metrics-bind-address=127.0.0.1:10249 --v=1
}

# The hosts' network: a bridge in a namespace of its own, a veth from it into each host
# namespace (created there directly: the root namespace never holds one), routes to pod ranges.
make_network() {
  ip netns add "$ns_br"
  ip -n "$ns_br" link add br0 type bridge
  ip -n "$ns_br" link set br0 up
  ip -n "$ns_br" link set lo up
  local hosts=("cp:$ns_cp:$cp_ip") i host name ns ip
  for ((i = 1; i <= workers; i++)); do
    hosts+=("w$i:$(worker_ns "$i"):$(worker_ip "$i")")
  done
  for host in "${hosts[@]}"; do
    IFS=: read -r name ns ip <<<"$host"
    ip netns add "$ns"
    ip -n "$ns_br" link add "v-$name" type veth peer name eth0 netns "$ns"
    ip -n "$ns_br" link set "v-$name" master br0 up
    ip -n "$ns" link set lo up
    ip -n "$ns" addr add "$ip/24" dev eth0
    ip -n "$ns" link set eth0 up
    ip netns exec "$ns" sysctl -qw net.ipv4.ip_forward=1
    ip netns exec "$ns" sysctl -qw net.bridge.bridge-nf-call-iptables=1 2>/dev/null || true
  done
  for host in "${hosts[@]}"; do
    IFS=: read -r name ns ip <<<"$host"
    # A route for ClusterIPs, so a client in the namespace gets as far as kube-proxy's DNAT.
    ip -n "$ns" route add "$service_cidr" dev eth0
    for ((i = 1; i <= workers; i++)); do
      [ "$name" = "w$i" ] || ip -n "$ns" route add "$(worker_pods "$i")" via "$(worker_ip "$i")"
    done
  done
}

kubectl_cp() { ip netns exec "$ns_cp" "$bin/kubectl" --kubeconfig="$run/admin.kubeconfig" "$@"; }

nodes_ready() {
  local ready
  ready="$(kubectl_cp get nodes -o \
    jsonpath='{range .items[*]}{.status.conditions[?(@.type=="Ready")].status}{"\n"}{end}' \
    | grep -c '^True$' || true)"
  [ "$ready" = "$workers" ]
}

runtime_packages() {
  apt_install etcd-server containerd runc containernetworking-plugins iptables conntrack \
    openssl curl
}

# True when a process recorded in $run/pids still runs its recorded program (a PID reused by
# another program after a reboot or a restored machine snapshot does not count).
cluster_alive() {
  local name pid command
  while read -r name pid; do
    command="$(tr '\0' ' ' 2>/dev/null <"/proc/$pid/cmdline" || true)"
    [[ "$command" == *"${name#w*-}"* ]] && return 0
  done <"$run/pids"
  return 1
}

start() {
  [ "$(id -u)" = 0 ] || die "needs root (network namespaces, cgroups, containerd)"
  if [ -e "$run/pids" ]; then
    cluster_alive && die "a cluster is running (state in $run): stop it first"
    say "state of a cluster whose processes are all gone in $run: cleaning it up"
    rm "$run/pids" # their PIDs may belong to other programs now: stop must not signal them
    stop
  fi
  runtime_packages
  local out begin i
  out="$(build)"
  bin="$out/bin"
  mkdir -p "$run/log"
  : >"$run/pids"
  trap 'status=$?; [ "$status" = 0 ] || { say "start failed: stopping"; stop; }' EXIT
  begin=$SECONDS
  make_network
  pause_tar="$(pause_tar)"
  start_control_plane
  for ((i = 1; i <= workers; i++)); do
    start_worker "$i"
  done
  # The tools' way in: kubectl (and helm, with KUBECONFIG) run in the control plane's namespace.
  mkdir -p "$run/bin"
  printf '#!/bin/sh\nexec ip netns exec %s %s --kubeconfig=%s "$@"\n' "$ns_cp" "$bin/kubectl" \
    "$run/admin.kubeconfig" >"$run/bin/kubectl"
  chmod +x "$run/bin/kubectl"
  wait_for "$workers nodes" 180 nodes_ready
  say "$workers nodes Ready $((SECONDS - begin)) s after start (build cached)"
  kubectl_cp get nodes -o wide >&2
  trap - EXIT
}

# Every PID of worker N: its daemons (recorded at launch) and what they started (shims,
# containers), found in the worker's pids cgroup.
worker_pids() {
  local dir="/sys/fs/cgroup/pids/$prefix-w$1"
  awk -v w="w$1-" 'index($1, w) == 1 {print $2}' "$run/pids" 2>/dev/null || true
  if [ -d "$dir" ]; then find "$dir" -name cgroup.procs -exec cat {} + 2>/dev/null || true; fi
}

kill_pids() { # signal pid...
  local signal="$1" pid
  shift
  for pid in "$@"; do
    kill "-$signal" "$pid" 2>/dev/null || true
  done
}

# SIGKILL to every process of worker N, by PID, until none is left (a node's sudden death).
kill_node() {
  local w="$1" pids pid alive killed=0
  for _ in $(seq 20); do
    mapfile -t pids < <(worker_pids "$w" | sort -u)
    alive=()
    for pid in "${pids[@]}"; do
      if kill -0 "$pid" 2>/dev/null; then alive+=("$pid"); fi
    done
    [ "${#alive[@]}" -gt 0 ] || break
    kill_pids KILL "${alive[@]}"
    killed=$((killed + ${#alive[@]}))
    sleep 0.2
  done
  say "worker w$w: killed $killed processes by PID"
}

stop() {
  [ -d "$run" ] || return 0
  local i ns controller dir
  # Kubelets first (so nothing restarts a container), then each worker's whole process tree,
  # then the control plane.
  if [ -f "$run/pids" ]; then
    # shellcheck disable=SC2046 # one PID per word
    kill_pids TERM $(awk '$1 ~ /-kubelet$/ {print $2}' "$run/pids")
    for ((i = 1; i <= workers; i++)); do
      kill_node "$i"
    done
    # shellcheck disable=SC2046
    kill_pids TERM $(awk '{print $2}' "$run/pids" | tac)
    sleep 1
    # shellcheck disable=SC2046
    kill_pids KILL $(awk '{print $2}' "$run/pids")
  fi
  # Mounts under the state directory (pod volumes, container root filesystems, pod network
  # namespaces), deepest first.
  findmnt -rn -o TARGET | { grep "^$run/" || true; } | sort -r | while read -r target; do
    umount -l "$target" 2>/dev/null || true
  done
  for ns in $(ip netns list | awk -v p="$prefix-" 'index($1, p) == 1 {print $1}'); do
    ip netns delete "$ns" 2>/dev/null || true
  done
  # runc also mirrors v1 paths into the unified (cgroup2) hierarchy of this hybrid layout.
  for controller in "${cgroup_controllers[@]}" unified; do
    for ((i = 1; i <= workers; i++)); do
      dir="/sys/fs/cgroup/$controller/$prefix-w$i"
      if [ -d "$dir" ]; then find "$dir" -depth -type d -exec rmdir {} \; 2>/dev/null || true; fi
    done
  done
  # The logs outlive the cluster, for a failed start or test to be read.
  if [ -d "$run/log" ]; then
    rm -rf "$cache/last-logs"
    cp -r "$run/log" "$cache/last-logs"
  fi
  rm -rf "$run"
  say "stopped; removed $run (logs kept in $cache/last-logs)"
}

case "${1:-}" in
  build) build ;;
  prepare)
    build >/dev/null
    runtime_packages
    ;;
  start) start ;;
  stop) stop ;;
  kill-node)
    kill_node "${2:?worker number}"
    # Those PIDs are gone: stop must not signal them again (a reused PID is someone else's).
    sed -i "/^w$2-/d" "$run/pids"
    ;;
  env)
    echo "KUBECONFIG=$run/admin.kubeconfig"
    echo "RAGBLEND_K8S_KUBECTL=$run/bin/kubectl"
    echo "RAGBLEND_K8S_CONTROL_PLANE=$ns_cp"
    for ((i = 1; i <= workers; i++)); do echo "RAGBLEND_K8S_WORKER_$i=$(worker_ns "$i")"; done
    ;;
  *)
    sed -n '2,/^set -euo/p' "$0" | sed '$d' >&2
    exit 2
    ;;
esac
