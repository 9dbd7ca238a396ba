#!/usr/bin/env bash
# Install with the development tools, then run lint and the whole test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install.sh dev
bash scripts/install-services.sh
.venv/bin/ruff check .
exec .venv/bin/python -m pytest "$@"
