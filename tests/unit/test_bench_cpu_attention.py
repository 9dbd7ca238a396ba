"""The CPU attention benchmark times the cases it names, and its two ways agree."""

from load_tests.bench_cpu_attention import cases, compare


def test_cases_hold_the_shares_they_name() -> None:
    queries = {name: q.shape[0] for name, (q, *_rest) in cases(200, 4, 2, 8).items()}
    assert queries == {
        "every position (causal)": 200,
        "15% of the prompt, scattered": 30,
        "55% of the prompt, scattered": 110,
        "a chunk's last quarter behind the rest": 50,
    }


def test_bf16_and_fp32_agree_to_bf16_rounding() -> None:
    results = compare(tokens=96, geometry="0.5b", repeats=1)
    assert len(results) == 4
    for row in results.values():
        assert row["max_relative_difference"] < 0.02
        assert row["bf16_ms"] > 0 and row["fp32_ms"] > 0
