"""Table and PNG line plots of TTFT sweep rows (context, chunk count, mode, median, speed-up)."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def print_sweep_table(rows: list[dict[str, Any]]) -> None:
    print(
        f"| {'context':>7} | {'chunks':>6} | {'chunk tokens':>12} | {'mode':12} "
        f"| {'median TTFT (s)':>15} | {'speed-up vs full':>16} |"
    )
    print(f"|{'-' * 9}|{'-' * 8}|{'-' * 14}|{'-' * 14}|{'-' * 17}|{'-' * 18}|")
    for row in rows:
        print(
            f"| {row['context_tokens']:>7} | {row['chunks']:>6} | {row['chunk_tokens']:>12} "
            f"| {row['mode']:12} | {row['median_ttft_s']:>15.3f} "
            f"| {row['speedup_vs_full']:>15.2f}x |"
        )


def plot_ttft(rows: list[dict[str, Any]], path: Path, title: str) -> None:
    """Median TTFT against context length: a panel per chunk count, a line per mode."""
    value = ("median_ttft_s", "median time to first token (s)")
    _line_panels(rows, path, ("chunks", "{} chunks"), "mode", value, title, log_y=True)


def plot_speedup(rows: list[dict[str, Any]], path: Path, title: str) -> None:
    """Speed-up over full against context length: a panel per mode, a line per chunk count."""
    others = [row for row in rows if row["mode"] != "full"]
    value = ("speedup_vs_full", "speed-up of median TTFT over full")
    _line_panels(others, path, ("mode", "{}"), "chunks", value, title, log_y=False)


def _line_panels(
    rows: list[dict[str, Any]],
    path: Path,
    panel: tuple[str, str],
    line_key: str,
    value: tuple[str, str],
    title: str,
    log_y: bool,
) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    (panel_key, panel_title), (value_key, value_label) = panel, value
    panels = list(dict.fromkeys(row[panel_key] for row in rows))
    figure, axes = plt.subplots(1, len(panels), figsize=(4.5 * len(panels), 4), squeeze=False)
    for axis, panel_value in zip(axes[0], panels, strict=True):
        in_panel = [row for row in rows if row[panel_key] == panel_value]
        for line in dict.fromkeys(row[line_key] for row in in_panel):
            points = sorted(
                (row["context_tokens"], row[value_key]) for row in in_panel if row[line_key] == line
            )
            axis.plot(*zip(*points, strict=True), marker="o", label=f"{line_key} {line}")
        if log_y:
            axis.set_yscale("log")
        else:
            axis.axhline(1.0, color="#888", linewidth=0.8, linestyle="--")
        axis.set_xscale("log", base=2)
        axis.set_xticks(sorted({row["context_tokens"] for row in in_panel}))
        axis.xaxis.set_major_formatter("{x:.0f}")
        axis.set_xlabel("context tokens")
        axis.set_title(panel_title.format(panel_value))
        axis.legend(fontsize=8)
    axes[0][0].set_ylabel(value_label)
    figure.suptitle(title)
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)
