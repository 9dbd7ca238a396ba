"""The selection patterns the paged-attention benchmark times are what their names say."""

from collections.abc import Callable

import torch

from engine.connector.paged_attention import position_runs
from load_tests.bench_paged_attention import runs_of, scattered, skewed_late

Pattern = Callable[[int, int, torch.Generator], torch.Tensor]


def _pick(pattern: Pattern, count: int = 96) -> torch.Tensor:
    positions = pattern(800, count, torch.Generator().manual_seed(3))
    assert positions.unique().numel() == positions.numel() == count
    assert int(positions.min()) >= 0 and int(positions.max()) < 800
    return torch.sort(positions).values


def test_runs_of_eight_come_in_whole_runs_of_eight() -> None:
    query_start_loc, _ = position_runs(_pick(runs_of(8)))
    lengths = (query_start_loc[1:] - query_start_loc[:-1]).tolist()
    assert all(length % 8 == 0 for length in lengths)


def test_late_skew_lies_later_than_scattered() -> None:
    late, uniform = _pick(skewed_late).double().mean(), _pick(scattered).double().mean()
    assert late > 480 > uniform - 80
