"""Per-request blend statistics, handed from the worker to the scheduler through files.

The worker writes a request's statistics before the forward pass that first computes it; the
scheduler reads them when the request finishes. vLLM's own worker->scheduler channel delivers
them only after requests that finish in that same step were already reported, so a one-token
answer would lose them.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any


class StatsMailbox:
    def __init__(self, directory: str | os.PathLike[str]) -> None:
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)

    def _path(self, request_id: str) -> Path:
        return self.directory / f"{request_id.replace(os.sep, '_')}.json"

    def post(self, request_id: str, stats: dict[str, Any]) -> None:
        path = self._path(request_id)
        staging = path.with_suffix(".tmp")
        staging.write_text(json.dumps(stats))
        os.replace(staging, path)

    def collect(self, request_id: str) -> dict[str, Any] | None:
        path = self._path(request_id)
        try:
            stats = json.loads(path.read_text())
        except FileNotFoundError:
            return None
        path.unlink(missing_ok=True)
        return stats
