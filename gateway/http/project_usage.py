"""Usage per project: generation requests and their prompt, cached and completion tokens.

Counted when a generation ends, both in ``/metrics`` (labelled by project: a label only API keys
name, so bounded by the configuration) and in totals since the start that the admin route
``GET /v1/projects`` reports beside what each project stores.
"""

from __future__ import annotations

import threading
from dataclasses import asdict, dataclass

from prometheus_client import Counter

from gateway.outputs import Usage

PROJECT_REQUESTS = Counter(
    "ragblend_project_requests_total", "Generation requests per project.", ["project"]
)
PROJECT_TOKENS = Counter(
    "ragblend_project_tokens_total",
    "Tokens per project: prompt, cached (prompt tokens from chunk KV or the prefix cache) and "
    "completion.",
    ["project", "kind"],
)


@dataclass
class ProjectTotals:
    requests: int = 0
    prompt_tokens: int = 0
    cached_tokens: int = 0
    completion_tokens: int = 0

    def as_dict(self) -> dict[str, int]:
        return asdict(self)


class UsageBook:
    """Each project's totals since the server started."""

    def __init__(self) -> None:
        self._totals: dict[str, ProjectTotals] = {}
        self._lock = threading.Lock()

    def record(self, project: str, usage: Usage) -> None:
        """One finished generation of `project`."""
        PROJECT_REQUESTS.labels(project).inc()
        counts = {
            "prompt": usage.prompt_tokens,
            "cached": usage.cached_tokens,
            "completion": usage.completion_tokens,
        }
        for kind, count in counts.items():
            PROJECT_TOKENS.labels(project, kind).inc(count)
        with self._lock:
            totals = self._totals.setdefault(project, ProjectTotals())
            totals.requests += 1
            totals.prompt_tokens += usage.prompt_tokens
            totals.cached_tokens += usage.cached_tokens
            totals.completion_tokens += usage.completion_tokens

    def of(self, project: str) -> ProjectTotals:
        with self._lock:
            return ProjectTotals(**self._totals.get(project, ProjectTotals()).as_dict())
