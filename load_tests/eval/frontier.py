"""Quality-speed frontier: F1 gap to full prefill against TTFT speed-up, one point per strategy.

    python -m load_tests.eval.frontier docs/bench/strategies_kc_tune_0.5b.json \
        docs/bench/strategies_kc_tune_135m.json --out docs/bench/frontier_kc_tune

Reads the JSON files written by ``load_tests.eval.quality`` or ``retrieval_shaped``, marks the
points no other strategy beats on both axes (the frontier) and writes a PNG with one panel per
model and split (runs with another chunk prefix join their model's panel, their modes tagged
with it). An evaluation's own TTFT is taken on short prompts, often on a busy machine: with
``--speed`` a ``load_tests.bench_sweep`` JSON gives the speed-ups instead, those of one context
length (``--context``), and modes that benchmark did not run are left out.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from load_tests.report import output_path, scratch


def frontier(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Rows not dominated: no other row is at least as good on gap and speed-up, better on one."""

    def dominates(a: dict[str, Any], b: dict[str, Any]) -> bool:
        at_least = a["f1_gap_to_full"] >= b["f1_gap_to_full"] and (
            a["speedup_vs_full"] >= b["speedup_vs_full"]
        )
        better = a["f1_gap_to_full"] > b["f1_gap_to_full"] or (
            a["speedup_vs_full"] > b["speedup_vs_full"]
        )
        return at_least and better

    candidates = [row for row in rows if row["mode"] != "full"]
    return [row for row in candidates if not any(dominates(o, row) for o in candidates)]


def tagged_rows(document: dict[str, Any]) -> list[dict[str, Any]]:
    """A result file's rows; blend modes of a run whose chunks were precomputed behind another
    prefix than the plain one are named with it, so runs of one model share a panel."""
    prefix = document["settings"].get("chunk_prefix", "plain")
    rows = []
    for row in document["rows"]:
        if prefix != "plain" and row["mode"] != "full":
            row = {**row, "mode": f"{row['mode']} [{prefix} prefix]"}
        rows.append(row)
    return rows


def with_benchmark_speed(
    rows: list[dict[str, Any]], sweep: dict[str, Any], context_tokens: int
) -> list[dict[str, Any]]:
    """``rows`` whose mode the sweep timed at ``context_tokens``, with its speed-up. A
    retrieval-shaped row's variant (``neighbours:``) does not change the work, so it is
    matched by the mode after it."""
    speedups = {
        row["mode"]: row["speedup_vs_full"]
        for row in sweep["rows"]
        if row["context_tokens"] == context_tokens
    }
    if not speedups:
        raise SystemExit(f"the speed benchmark has no rows at {context_tokens} context tokens")
    timed = []
    for row in rows:
        mode = _strategy(row["mode"])
        if mode in speedups:
            timed.append({**row, "speedup_vs_full": speedups[mode]})
        else:
            print(f"  no benchmark speed for {row['mode']}: left out", file=sys.stderr)
    return timed


def _strategy(mode: str) -> str:
    """The mode as the speed benchmark names it: without a prefix tag or a variant."""
    mode = mode.split(" [")[0]
    variant, colon, strategy = mode.partition(":")
    return strategy if colon and not any(mark in variant for mark in "@/=") else mode


def plot(panels: list[tuple[str, list[dict[str, Any]]]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(1, len(panels), figsize=(7 * len(panels), 5.5), squeeze=False)
    for axis, (title, rows) in zip(axes[0], panels, strict=True):
        best = {row["mode"] for row in frontier(rows)}
        for row in rows:
            if row["mode"] == "full":
                continue
            on_frontier = row["mode"] in best
            axis.scatter(
                row["speedup_vs_full"],
                row["f1_gap_to_full"],
                color="#3a7" if on_frontier else "#999",
                zorder=3,
            )
            axis.annotate(row["mode"], (row["speedup_vs_full"], row["f1_gap_to_full"]), fontsize=6)
        axis.axhline(0, color="#333", linewidth=0.8)
        axis.axhline(-0.02, color="#d83", linestyle="--", linewidth=0.8, label="-0.02 F1")
        axis.axvline(4, color="#38d", linestyle="--", linewidth=0.8, label="4x")
        axis.set_xlabel("TTFT speed-up over full prefill")
        axis.set_ylabel("F1 minus full prefill's F1")
        axis.set_title(title)
        axis.legend(loc="lower left", fontsize=8)
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)


def build_parser() -> argparse.ArgumentParser:
    """The command line; ``parse_args([...])`` also gives callers the defaults."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("results", nargs="+", help="JSON files from load_tests.eval.quality")
    parser.add_argument("--out", default=scratch("frontier"), help="<out>.png")
    parser.add_argument("--speed", help="a load_tests.bench_sweep JSON: speed-ups from there")
    parser.add_argument("--context", type=int, default=3072, help="the --speed context length")
    return parser


def main() -> int:
    args = build_parser().parse_args()
    sweep = json.loads(Path(args.speed).read_text()) if args.speed else None
    panels: dict[str, list[dict[str, Any]]] = {}
    for name in args.results:
        document = json.loads(Path(name).read_text())
        settings = document["settings"]
        title = f"{settings['model']}, {settings['dataset']} ({settings['split']}, "
        title += f"{settings['items']} items)"
        rows = tagged_rows(document)
        if sweep is not None:
            rows = with_benchmark_speed(rows, sweep, args.context)
        panels.setdefault(title, []).extend(rows)
    for title, rows in panels.items():
        print(title)
        for row in frontier(rows):
            print(f"  frontier: {row['mode']}: gap {row['f1_gap_to_full']:+.3f}, ", end="")
            print(f"{row['speedup_vs_full']:.2f}x")
    out = output_path(args.out, ".png")
    out.parent.mkdir(parents=True, exist_ok=True)
    plot(list(panels.items()), out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
