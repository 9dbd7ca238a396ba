"""HKVD selection and gradual schedules against explicit loops."""

import pytest
import torch

from engine.blend.select import GradualSchedule, keep_count, kv_deviation, select_top, top_rows


def kv(seed: int, tokens: int = 10, heads: int = 2, dim: int = 8) -> torch.Tensor:
    return torch.randn(tokens, heads, dim, generator=torch.Generator().manual_seed(seed))


def reference_deviation(fresh: torch.Tensor, cached: torch.Tensor, normalize: bool) -> torch.Tensor:
    out = []
    for t in range(fresh.shape[0]):
        dist = sum(
            float((fresh[t, h] - cached[t, h]).pow(2).sum().sqrt()) for h in range(fresh.shape[1])
        )
        norm = sum(float(cached[t, h].pow(2).sum().sqrt()) for h in range(fresh.shape[1]))
        out.append(dist / norm if normalize else dist)
    return torch.tensor(out)


@pytest.mark.parametrize("normalize", [False, True])
def test_kv_deviation_matches_loop(normalize: bool) -> None:
    fk, fv, ck, cv = kv(0), kv(1), kv(2), kv(3)
    ref_k = reference_deviation(fk, ck, normalize)
    ref_v = reference_deviation(fv, cv, normalize)
    torch.testing.assert_close(kv_deviation(fk, fv, ck, cv, "k", normalize), ref_k)
    torch.testing.assert_close(kv_deviation(fk, fv, ck, cv, "v", normalize), ref_v)
    torch.testing.assert_close(kv_deviation(fk, fv, ck, cv, "kv", normalize), ref_k + ref_v)


def test_kv_deviation_zero_for_identical_and_fp32_for_bf16() -> None:
    k, v = kv(0).bfloat16(), kv(1).bfloat16()
    dev = kv_deviation(k, v, k, v, "kv", normalize=True)
    assert dev.dtype == torch.float32 and dev.shape == (10,)
    assert torch.equal(dev, torch.zeros(10))


def test_kv_deviation_rejects_bad_input() -> None:
    k = kv(0)
    with pytest.raises(ValueError, match="metric"):
        kv_deviation(k, k, k, k, "q", normalize=False)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="shape"):
        kv_deviation(k, k, k[:5], k, "k", normalize=False)


def test_select_top_count_forced_and_candidates() -> None:
    deviation = torch.tensor([9.0, 0.1, 5.0, 0.2, 4.0, 0.3, 8.0, 3.0, 100.0, 7.0])
    candidates = torch.tensor([1, 2, 3, 4, 5, 6, 7])  # 0, 8 and 9 are not candidates
    forced = torch.tensor([9, 3])
    got = select_top(deviation, candidates, 2, forced)
    assert got.tolist() == [2, 3, 6, 9]  # top-2 candidates (6, 2) plus forced, sorted
    assert got.dtype == torch.long


def test_select_top_count_skips_forced_candidates() -> None:
    deviation = torch.tensor([1.0, 9.0, 8.0, 7.0, 6.0])
    got = select_top(deviation, torch.arange(5), 2, forced=torch.tensor([1]))
    assert got.tolist() == [1, 2, 3]


def test_select_top_ratio_and_clamp() -> None:
    deviation = torch.arange(20, dtype=torch.float32)
    candidates = torch.arange(20)
    none = torch.empty(0, dtype=torch.long)
    assert select_top(deviation, candidates, 0.15, none).tolist() == [17, 18, 19]
    assert select_top(deviation, candidates, 0.01, none).tolist() == [19]
    assert select_top(deviation, candidates, 0.0, none).tolist() == []
    assert select_top(deviation, candidates[:4], 50, none).tolist() == [0, 1, 2, 3]
    assert select_top(deviation, none, 5, torch.tensor([7, 7])).tolist() == [7]


@pytest.mark.parametrize("bad", [1.5, -0.1, -1, True])
def test_select_top_rejects_bad_amount(bad: float) -> None:
    with pytest.raises((ValueError, TypeError)):
        select_top(torch.ones(4), torch.arange(4), bad, torch.empty(0, dtype=torch.long))


def test_gradual_schedule_keep_count() -> None:
    schedule = GradualSchedule(((1, 0.3), (2, 0.15), (5, 0.15)))
    assert keep_count(schedule, 0, 200) is None
    assert keep_count(schedule, 1, 200) == 60
    assert keep_count(schedule, 2, 200) == 30
    assert keep_count(schedule, 3, 200) is None
    assert keep_count(schedule, 5, 200) == 30
    assert keep_count(schedule, 2, 3) == 1
    assert keep_count(schedule, 2, 0) == 0


def test_gradual_schedule_accepts_lists() -> None:
    schedule = GradualSchedule([[1, 0.5], [3, 0.25]])  # type: ignore[arg-type]
    assert schedule.checkpoints == ((1, 0.5), (3, 0.25))


@pytest.mark.parametrize(
    ("points", "message"),
    [
        ((), "at least one"),
        (((2, 0.3), (1, 0.2)), "increase strictly"),
        (((1, 0.3), (1, 0.2)), "increase strictly"),
        (((1, 0.2), (2, 0.3)), "must not increase"),
        (((1, 0.0),), r"\(0, 1\]"),
        (((1, 1.5),), r"\(0, 1\]"),
        (((-1, 0.5),), ">= 0"),
    ],
)
def test_gradual_schedule_validation(points: tuple, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        GradualSchedule(points)


def test_question_attention_matches_loop() -> None:
    from engine.blend.select import question_attention

    generator = torch.Generator().manual_seed(3)
    keys = torch.randn(10, 2, 8, generator=generator)
    queries = torch.randn(3, 4, 8, generator=generator)
    positions = torch.tensor([7, 8, 9])
    expected = torch.zeros(10)
    for row, position in enumerate(positions.tolist()):
        for head in range(4):
            visible = keys[: position + 1, head // 2]
            expected[: position + 1] += (visible @ queries[row, head] * 0.5).softmax(dim=0)
    got = question_attention(queries, positions, keys, scale=0.5)
    assert torch.allclose(got, expected, atol=1e-5)
    assert torch.isclose(got.sum(), torch.tensor(3.0 * 4))  # one softmax per query and head


@pytest.mark.parametrize("seed", range(5))
def test_top_rows_picks_what_select_top_picks_from_counts_the_caller_knows(seed: int) -> None:
    generator = torch.Generator().manual_seed(seed)
    scores = torch.randn(30, generator=generator)
    forced = torch.rand(30, generator=generator) < 0.3
    eligible = ~forced & (torch.rand(30, generator=generator) < 0.7)
    num_forced, num_eligible = int(forced.sum()), int(eligible.sum())
    for count in (0, 1, num_eligible // 2, num_eligible):
        got = top_rows(scores, forced, num_forced, count, eligible)
        expected = select_top(scores, eligible.nonzero().flatten(), count, forced.nonzero())
        assert got.tolist() == expected.tolist()
    everything = top_rows(scores, forced, num_forced, 30 - num_forced)
    assert everything.tolist() == list(range(30))


def test_top_rows_refuses_more_rows_than_there_are() -> None:
    with pytest.raises(ValueError, match="cannot pick"):
        top_rows(torch.ones(4), torch.zeros(4, dtype=torch.bool), 0, 5)
