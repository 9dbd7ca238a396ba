"""Presentation of a benchmark's results: where they go, an aligned text table, a JSON document."""

from __future__ import annotations

import argparse
import json
from collections.abc import Mapping, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from load_tests.stats import LoadSummary

NOT_MEASURED = "n/a"
RESULTS_DIR = Path("load_tests/results")
"""Where a benchmark writes unless ``--out`` says otherwise: git ignores it, so a run never
overwrites a published result; publishing one is an explicit ``--out docs/bench/<name>``."""


def scratch(name: str) -> str:
    """The default ``--out`` of a benchmark: ``name`` in the scratch folder ``RESULTS_DIR``."""
    return str(RESULTS_DIR / name)


def output_path(stem: str | Path, suffix: str) -> Path:
    """``stem`` plus ``suffix``; unlike ``Path.with_suffix`` it keeps dots in the stem
    (``strategies_0.5b`` -> ``strategies_0.5b.json``)."""
    return Path(f"{stem}{suffix}")


def milliseconds(value: float | None) -> str:
    return NOT_MEASURED if value is None else f"{value:.1f} ms"


def summary_rows(summary: LoadSummary) -> list[tuple[str, str]]:
    rows = [
        ("requests ok", str(summary.requests_ok)),
        ("requests failed", str(summary.requests_failed)),
        ("elapsed", f"{summary.elapsed_s:.2f} s"),
        ("ok requests/s", f"{summary.ok_requests_per_s:.2f}"),
        ("output tokens", str(summary.output_tokens_total)),
        ("output tokens/s", f"{summary.output_tokens_per_s:.1f}"),
        ("TTFT p50", milliseconds(summary.ttft_p50_ms)),
        ("TTFT p95", milliseconds(summary.ttft_p95_ms)),
        ("TTFT p99", milliseconds(summary.ttft_p99_ms)),
        ("latency mean", milliseconds(summary.latency_mean_ms)),
    ]
    if summary.cached_prompt_share is not None:
        rows.append(("prompt tokens from cache", f"{summary.cached_prompt_share:.1%}"))
    rows.extend((f"errors [{name}]", str(count)) for name, count in summary.errors.items())
    return rows


def format_grid(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """Columns under a header rule: the first aligned left, the others aligned right."""
    widths = [max(len(row[column]) for row in (header, *rows)) for column in range(len(header))]

    def line(cells: Sequence[str]) -> str:
        label, *values = cells
        label_width, *value_widths = widths
        aligned = (value.rjust(width) for value, width in zip(values, value_widths, strict=True))
        return "  ".join([label.ljust(label_width), *aligned])

    return "\n".join([line(header), line(["-" * width for width in widths]), *map(line, rows)])


def format_table(rows: Sequence[tuple[str, str]]) -> str:
    """Two columns: labels aligned left, values aligned right, under a header rule."""
    return format_grid(("metric", "value"), rows)


def report_document(settings: Mapping[str, Any], summary: LoadSummary) -> dict[str, Any]:
    return {"settings": dict(settings), "summary": asdict(summary)}


def parse_rounds(parser: argparse.ArgumentParser) -> argparse.Namespace:
    """The arguments, with ``--rounds`` (the first a warm-up, left out of the medians) added."""
    parser.add_argument("--rounds", type=int, default=6, help="the first is a warm-up")
    args = parser.parse_args()
    if args.rounds < 2:
        parser.error("--rounds must be at least 2 (the first is a warm-up)")
    return args


def publish_rows(
    args: argparse.Namespace,
    columns: Mapping[str, str],
    rows: Sequence[Mapping[str, Any]],
    trials: Sequence[Any],
) -> None:
    """Print ``rows`` as a grid (``columns``: a row's key -> its column's title), and write them
    whole with the run's settings and ``trials`` to ``<args.out>.json``."""
    table = [tuple(str(row[key]) for key in columns) for row in rows]
    print(format_grid(tuple(columns.values()), table))
    document = {"settings": vars(args), "rows": list(rows), "trials": list(trials)}
    write_json(output_path(Path(args.out), ".json"), document)


def write_json(path: Path, document: Mapping[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")
