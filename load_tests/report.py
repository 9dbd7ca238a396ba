"""Presentation of a load-test summary: an aligned text table and a JSON document."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from load_tests.stats import LoadSummary

NOT_MEASURED = "n/a"


def _milliseconds(value: float | None) -> str:
    return NOT_MEASURED if value is None else f"{value:.1f} ms"


def summary_rows(summary: LoadSummary) -> list[tuple[str, str]]:
    rows = [
        ("requests ok", str(summary.requests_ok)),
        ("requests failed", str(summary.requests_failed)),
        ("elapsed", f"{summary.elapsed_s:.2f} s"),
        ("ok requests/s", f"{summary.ok_requests_per_s:.2f}"),
        ("output tokens", str(summary.output_tokens_total)),
        ("output tokens/s", f"{summary.output_tokens_per_s:.1f}"),
        ("TTFT p50", _milliseconds(summary.ttft_p50_ms)),
        ("TTFT p95", _milliseconds(summary.ttft_p95_ms)),
        ("TTFT p99", _milliseconds(summary.ttft_p99_ms)),
        ("latency mean", _milliseconds(summary.latency_mean_ms)),
    ]
    if summary.cached_prompt_share is not None:
        rows.append(("prompt tokens from cache", f"{summary.cached_prompt_share:.1%}"))
    rows.extend((f"errors [{name}]", str(count)) for name, count in summary.errors.items())
    return rows


def format_table(rows: Sequence[tuple[str, str]]) -> str:
    """Two columns: labels aligned left, values aligned right, under a header rule."""
    header = ("metric", "value")
    label_width = max(len(label) for label, _ in (header, *rows))
    value_width = max(len(value) for _, value in (header, *rows))
    lines = [
        f"{header[0]:<{label_width}}  {header[1]:>{value_width}}",
        f"{'-' * label_width}  {'-' * value_width}",
    ]
    lines.extend(f"{label:<{label_width}}  {value:>{value_width}}" for label, value in rows)
    return "\n".join(lines)


def report_document(settings: Mapping[str, Any], summary: LoadSummary) -> dict[str, Any]:
    return {"settings": dict(settings), "summary": asdict(summary)}


def write_json(path: Path, document: Mapping[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")
