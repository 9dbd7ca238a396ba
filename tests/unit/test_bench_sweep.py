"""The TTFT sweep's grid, summary rows and plots (no engine)."""

from __future__ import annotations

from pathlib import Path

import pytest

from load_tests.bench_sweep import GridPoint, sweep_grid, sweep_rows
from load_tests.sweep_plot import plot_speedup, plot_ttft


def test_grid_splits_each_context_evenly_and_skips_tiny_chunks() -> None:
    grid = sweep_grid([64, 1000], [2, 8])
    assert grid == [GridPoint(64, 2), GridPoint(1000, 2), GridPoint(1000, 8)]
    assert [point.chunk_tokens for point in grid] == [32, 500, 125]
    assert grid[2].label == "1000/8x125"
    assert sweep_grid([16], [2]) == []


def test_rows_hold_medians_and_speedups_per_grid_point() -> None:
    results = {
        GridPoint(1024, 2): {"full": [1.0, 3.0, 2.0], "blend@0.15": [0.5, 0.4, 9.0]},
        GridPoint(2048, 4): {"full": [4.0], "blend@0.15": [1.0]},
    }
    rows = sweep_rows(results)
    assert [(row["context_tokens"], row["chunks"], row["mode"]) for row in rows] == [
        (1024, 2, "full"),
        (1024, 2, "blend@0.15"),
        (2048, 4, "full"),
        (2048, 4, "blend@0.15"),
    ]
    assert rows[1]["chunk_tokens"] == 512
    assert rows[1]["median_ttft_s"] == pytest.approx(0.5)
    assert rows[1]["speedup_vs_full"] == pytest.approx(4.0)
    assert rows[0]["speedup_vs_full"] == pytest.approx(1.0)
    assert rows[3]["samples"] == [1.0]


def test_plots_write_png_files(tmp_path: Path) -> None:
    results = {
        GridPoint(context, count): {"full": [context / 1000], "reuse": [0.1], "blend@0.15": [0.2]}
        for context in (1024, 2048, 4096)
        for count in (2, 4)
    }
    rows = sweep_rows(results)
    for plot in (plot_ttft, plot_speedup):
        path = tmp_path / f"{plot.__name__}.png"
        plot(rows, path, title="synthetic")
        assert path.read_bytes().startswith(b"\x89PNG")
        assert path.stat().st_size > 1000
