"""Arrival-rate sweeps: a table per mode and the highest rate each mode sustains at a TTFT p95."""

from __future__ import annotations

import argparse
import math
from collections.abc import Mapping
from dataclasses import asdict
from typing import Any

from load_tests.report import NOT_MEASURED, format_grid, milliseconds
from load_tests.stats import LoadSummary

RATE_COLUMNS = (
    "rate/s",
    "ok req/s",
    "TTFT p50",
    "TTFT p95",
    "TTFT p99",
    "failed",
    "errors",
    "from cache",
    "sustained",
)


def parse_rates(text: str) -> list[float]:
    """``"2,0.5,1"`` as distinct positive finite rates per second, ascending."""
    try:
        rates = sorted({float(part) for part in text.split(",")})
    except ValueError as exc:
        message = f"not a comma-separated list of numbers: {text!r}"
        raise argparse.ArgumentTypeError(message) from exc
    if not all(math.isfinite(rate) and rate > 0 for rate in rates):
        raise argparse.ArgumentTypeError(f"rates must be positive and finite: {text!r}")
    return rates


def sustained(summary: LoadSummary, p95_target_ms: float) -> bool:
    """No failed (or dropped) request, and a measured TTFT p95 within the target."""
    return (
        summary.requests_failed == 0
        and summary.ttft_p95_ms is not None
        and summary.ttft_p95_ms <= p95_target_ms
    )


def highest_sustained_rate(
    sweep: Mapping[float, LoadSummary], p95_target_ms: float
) -> float | None:
    """The highest rate sustained, even above one that was not; None when none was.

    A rate that fails below a sustained one is shown in the table rather than hidden here.
    """
    return max(
        (rate for rate, summary in sweep.items() if sustained(summary, p95_target_ms)), default=None
    )


def best_rates(
    sweeps: Mapping[str, Mapping[float, LoadSummary]], p95_target_ms: float
) -> dict[str, float | None]:
    """Each mode's highest sustained rate."""
    return {mode: highest_sustained_rate(sweep, p95_target_ms) for mode, sweep in sweeps.items()}


def speedup(rates: Mapping[str, float | None], mode: str, baseline: str) -> float | None:
    """``mode``'s sustained rate over ``baseline``'s; None unless both sustained a rate."""
    rate, base = rates.get(mode), rates.get(baseline)
    return rate / base if rate is not None and base is not None else None


def _errors(summary: LoadSummary) -> str:
    return " ".join(f"{name}:{count}" for name, count in summary.errors.items()) or "-"


def _share(value: float | None) -> str:
    return NOT_MEASURED if value is None else f"{value:.1%}"


def rate_table(sweep: Mapping[float, LoadSummary], p95_target_ms: float) -> str:
    rows = [
        (
            f"{rate:g}",
            f"{summary.ok_requests_per_s:.2f}",
            milliseconds(summary.ttft_p50_ms),
            milliseconds(summary.ttft_p95_ms),
            milliseconds(summary.ttft_p99_ms),
            str(summary.requests_failed),
            _errors(summary),
            _share(summary.cached_prompt_share),
            "yes" if sustained(summary, p95_target_ms) else "no",
        )
        for rate, summary in sorted(sweep.items())
    ]
    return format_grid(RATE_COLUMNS, rows)


def comparison_text(sweeps: Mapping[str, Mapping[float, LoadSummary]], p95_target_ms: float) -> str:
    """Each mode's highest sustained rate and, with both present, blend's over full's."""
    best = best_rates(sweeps, p95_target_ms)
    lines = [f"highest rate with TTFT p95 <= {p95_target_ms:g} ms and no errors:"]
    lines.extend(
        f"  {mode}: " + ("none of the tested rates" if rate is None else f"{rate:g} req/s")
        for mode, rate in best.items()
    )
    ratio = speedup(best, "blend", "full")
    if ratio is not None:
        lines.append(f"  blend / full: {ratio:.2f}x")
    return "\n".join(lines)


def rates_document(
    sweeps: Mapping[str, Mapping[float, LoadSummary]], p95_target_ms: float
) -> dict[str, Any]:
    """The JSON ``rates`` section: every run, each mode's highest sustained rate, the ratio."""
    best = best_rates(sweeps, p95_target_ms)
    return {
        "p95_target_ms": p95_target_ms,
        "runs": {
            mode: [
                {"rate_per_s": rate, "sustained": sustained(summary, p95_target_ms)}
                | asdict(summary)
                for rate, summary in sorted(sweep.items())
            ]
            for mode, sweep in sweeps.items()
        },
        "highest_sustained_rate_per_s": best,
        "blend_over_full": speedup(best, "blend", "full"),
    }
