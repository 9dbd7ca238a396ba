"""Table and PNG plot of benchmark rows (phase, mode, median TTFT, speed-up over full)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

_COLOURS = {"blend": "#3a7", "reuse": "#d83"}


def print_table(rows: list[dict[str, Any]]) -> None:
    """Medians, speed-ups over full and, where a row has one, the ratio to the memory tier."""
    header = f"{'median TTFT (s)':>16} {'speed-up vs full':>17} {'vs memory':>10}"
    print(f"{'phase':10} {'mode':12} {header}")
    for row in rows:
        print(
            f"{row['phase']:10} {row['mode']:12} {row['median_ttft_s']:>16.3f} "
            f"{_times(row['speedup_vs_full']):>17} {_times(row.get('vs_memory')):>10}"
        )


def _times(ratio: float | None) -> str:
    return "" if ratio is None else f"{ratio:.2f}x"


def plot_ttft(rows: list[dict[str, Any]], path: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels = [f"{row['mode']}\n({row['phase']})" for row in rows]
    values = [row["median_ttft_s"] for row in rows]
    figure, axis = plt.subplots(figsize=(max(6, len(rows) * 1.1), 4))
    bars = axis.bar(
        labels, values, color=[_COLOURS.get(r["mode"].split("@")[0], "#888") for r in rows]
    )
    for bar, row in zip(bars, rows, strict=True):
        axis.annotate(
            _times(row["speedup_vs_full"] or row.get("vs_memory")),
            (bar.get_x() + bar.get_width() / 2, bar.get_height()),
            ha="center",
            va="bottom",
        )
    axis.set_ylabel("median time to first token (s)")
    axis.set_title(f"TTFT by mode: {title}")
    axis.tick_params(axis="x", labelsize=8)
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)
