"""Pure statistics for load-test results: per-request records in, one summary out."""

from __future__ import annotations

import math
import statistics
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class RequestRecord:
    """What one streamed request measured.

    ``error`` is None for a request that finished its stream; otherwise it names the failure:
    an HTTP status code such as ``"503"``, a transport exception name such as ``"ConnectError"``,
    or a stream problem such as ``"stream_error"``.
    """

    latency_s: float
    ttft_s: float | None = None
    output_tokens: int = 0
    error: str | None = None
    prompt_tokens: int = 0
    cached_tokens: int = 0
    """Prompt tokens the server reports as served from caches (chunk KV or prefix cache)."""

    @property
    def ok(self) -> bool:
        return self.error is None


@dataclass(frozen=True)
class LoadSummary:
    """Aggregate results of a run; latencies in milliseconds, rates per wall-clock second."""

    requests_total: int
    requests_ok: int
    requests_failed: int
    elapsed_s: float
    ok_requests_per_s: float
    output_tokens_total: int
    output_tokens_per_s: float
    ttft_p50_ms: float | None
    ttft_p95_ms: float | None
    ttft_p99_ms: float | None
    latency_mean_ms: float | None
    errors: dict[str, int] = field(default_factory=dict)
    cached_prompt_share: float | None = None


def percentile(values: Sequence[float], percent: float) -> float:
    """Percentile with linear interpolation between closest ranks (numpy's default method)."""
    if not values:
        raise ValueError("percentile of an empty sequence is undefined")
    if not 0.0 <= percent <= 100.0:
        raise ValueError(f"percent must be within [0, 100], got {percent}")
    ordered = sorted(values)
    rank = (len(ordered) - 1) * percent / 100.0
    lower = math.floor(rank)
    upper = math.ceil(rank)
    return ordered[lower] + (ordered[upper] - ordered[lower]) * (rank - lower)


def mean(values: Sequence[float]) -> float:
    if not values:
        raise ValueError("mean of an empty sequence is undefined")
    return math.fsum(values) / len(values)


def ttft_trials(values: Sequence[float]) -> dict[str, Any]:
    """A benchmark row's TTFT over its trials: median, fastest and every sample, in seconds."""
    return {
        "median_ttft_s": round(statistics.median(values), 3),
        "fastest_ttft_s": round(min(values), 3),
        "samples": [round(value, 3) for value in values],
    }


def rate(count: float, elapsed_s: float) -> float:
    """Events per second; zero when no time has elapsed."""
    return count / elapsed_s if elapsed_s > 0 else 0.0


def count_errors(records: Sequence[RequestRecord]) -> dict[str, int]:
    """Failed requests per error name, most frequent first."""
    counts = Counter(record.error for record in records if record.error is not None)
    return dict(counts.most_common())


def _milliseconds_percentile(seconds: Sequence[float], percent: float) -> float | None:
    return percentile(seconds, percent) * 1000.0 if seconds else None


def summarize(records: Sequence[RequestRecord], elapsed_s: float) -> LoadSummary:
    """Summarize a run; latency, TTFT and token figures count successful requests only."""
    successful = [record for record in records if record.ok]
    ttfts = [record.ttft_s for record in successful if record.ttft_s is not None]
    latencies = [record.latency_s for record in successful]
    output_tokens = sum(record.output_tokens for record in successful)
    return LoadSummary(
        requests_total=len(records),
        requests_ok=len(successful),
        requests_failed=len(records) - len(successful),
        elapsed_s=elapsed_s,
        ok_requests_per_s=rate(len(successful), elapsed_s),
        output_tokens_total=output_tokens,
        output_tokens_per_s=rate(output_tokens, elapsed_s),
        ttft_p50_ms=_milliseconds_percentile(ttfts, 50),
        ttft_p95_ms=_milliseconds_percentile(ttfts, 95),
        ttft_p99_ms=_milliseconds_percentile(ttfts, 99),
        latency_mean_ms=mean(latencies) * 1000.0 if latencies else None,
        errors=count_errors(records),
        cached_prompt_share=_share(
            sum(record.cached_tokens for record in successful),
            sum(record.prompt_tokens for record in successful),
        ),
    )


def _share(part: int, whole: int) -> float | None:
    return part / whole if whole else None
