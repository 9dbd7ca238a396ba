#!/usr/bin/env bash
# Install ragblend and everything it needs into .venv/ (idempotent; fast when nothing changed).
#   bash scripts/install.sh          # serving: CPU, or CUDA when an NVIDIA GPU is visible
#   bash scripts/install.sh dev      # serving plus the test and lint tools, and Helm
set -euo pipefail
cd "$(dirname "$0")/.."

python="${RAGBLEND_PYTHON:-python3.11}"
command -v "$python" >/dev/null || { echo "error: $python not found (ragblend needs Python 3.11)" >&2; exit 1; }

device="${RAGBLEND_INSTALL_DEVICE:-}"
if [ -z "$device" ]; then
  device=cpu
  if command -v nvidia-smi >/dev/null && nvidia-smi -L >/dev/null 2>&1; then device=cuda; fi
fi
extras="$device,retrieval"
[ "${1:-}" = "dev" ] && extras="$extras,dev"

# Helm for the chart's checks and the Kubernetes test (its own pin and cache; a no-op when present).
if [ "${1:-}" = "dev" ]; then bash scripts/install-k8s-tools.sh .venv/bin; fi

stamp=".venv/.ragblend-installed"
wanted="$extras $(cat pyproject.toml scripts/install.sh | sha256sum | cut -c1-16)"
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$wanted" ]; then
  exit 0
fi

[ -x .venv/bin/python ] || "$python" -m venv .venv
echo "Installing ragblend[$extras] into .venv/ (first time: a few minutes)" >&2
.venv/bin/python -m pip install --disable-pip-version-check -q -e ".[$extras]"
if [ "${1:-}" = "dev" ]; then
  # Client libraries the compatibility tests drive whose metadata caps jiter, rich, openai or
  # setuptools below the releases the gateway ships; they run on them (the tests show it). Their
  # other requirements are in the dev extra. bfcl-eval: only the Berkeley Function Calling
  # Leaderboard's questions and answers that it ships are read (load_tests/eval/bfcl.py).
  .venv/bin/python -m pip install --disable-pip-version-check -q --no-deps \
    instructor==1.17.0 llama-index-core==0.14.25 \
    llama-index-llms-openai==0.8.3 llama-index-llms-openai-like==0.8.1 bfcl-eval==2026.3.23
fi
# pip drags in CUDA builds of these; they break `import transformers` on the CPU torch.
if [ "$device" = cpu ]; then
  .venv/bin/python -m pip uninstall -q -y torchvision torchaudio torchcodec 2>/dev/null || true
fi
echo "$wanted" > "$stamp"
