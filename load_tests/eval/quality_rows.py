"""The report of a quality run: one row per mode from its per-item records, and the table.

Split out of ``quality.py`` so that the evaluations that share its records (``retrieval_shaped``,
``frontier`` reads the rows) share one summary; the JSON keys are named after the score
(``f1``, ``f1_ci95``, ``f1_gap_to_full``, ``f1_gap_ci95``; ``rouge_l``...).
"""

from __future__ import annotations

import statistics
from typing import Any

from load_tests.eval.tasks import SCORE_LABELS


def summarize(records: dict[str, list[dict]], scores: tuple[str, ...]) -> list[dict[str, Any]]:
    """One row per mode; ``scores[0]`` gets a 95% interval and a paired gap to full, the rest
    means; the mean recomputed share where the records have one."""
    from load_tests.eval.metrics import agreement, mean_ci95, paired_diff_ci95

    key, *others = scores
    full = records.get("full")
    full_ttft = statistics.median(r["ttft_s"] for r in full) if full else None
    rows = []
    for mode, results in records.items():
        mean, low, high = mean_ci95([r[key] for r in results])
        ttft = statistics.median(r["ttft_s"] for r in results)
        row = {
            "mode": mode,
            key: round(mean, 4),
            f"{key}_ci95": [round(low, 4), round(high, 4)],
            **{other: round(statistics.mean(r[other] for r in results), 4) for other in others},
            "median_ttft_s": round(ttft, 4),
        }
        shares = [r["recomputed_share"] for r in results if r.get("recomputed_share") is not None]
        if shares:  # of the answers whose statistics arrived
            row["recomputed_share"] = round(statistics.mean(shares), 4)
        if full:
            row["agree_with_full"] = round(
                agreement([r["answer"] for r in results], [r["answer"] for r in full]), 4
            )
            row[f"{key}_gap_to_full"] = round(mean - statistics.mean(r[key] for r in full), 4)
            _, low, high = paired_diff_ci95([r[key] for r in results], [r[key] for r in full])
            row[f"{key}_gap_ci95"] = [round(low, 4), round(high, 4)]
            row["speedup_vs_full"] = round(full_ttft / ttft, 2)
        rows.append(row)
    return rows


def print_rows(rows: list[dict[str, Any]], scores: tuple[str, ...]) -> None:
    key, *others = scores
    width = max(12, *(len(row["mode"]) for row in rows))
    extra = "".join(f" {SCORE_LABELS[other]:>7}" for other in others)
    print(
        f"{'mode':{width}} {SCORE_LABELS[key]:>7} {'95% CI':>15}{extra} {'gap':>7} "
        f"{'paired 95% CI':>17} {'agree':>6} {'share':>6} {'TTFT':>8} {'speed':>6}"
    )
    for row in rows:
        low, high = row[f"{key}_ci95"]
        gap_low, gap_high = row.get(f"{key}_gap_ci95", (0.0, 0.0))
        means = "".join(f" {row[other]:>7.3f}" for other in others)
        print(
            f"{row['mode']:{width}} {row[key]:>7.3f} {f'[{low:.3f}, {high:.3f}]':>15}{means} "
            f"{row.get(f'{key}_gap_to_full', 0.0):>+7.3f} "
            f"{f'[{gap_low:+.3f}, {gap_high:+.3f}]':>17} "
            f"{row.get('agree_with_full', 1.0):>6.2f} {row.get('recomputed_share', 1.0):>6.3f} "
            f"{row['median_ttft_s']:>7.3f}s {row.get('speedup_vs_full', 1.0):>5.2f}x"
        )
