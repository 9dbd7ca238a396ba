"""Evaluation metrics against hand-worked values (SQuAD EM/F1, Rouge-L LCS, intervals)."""

from __future__ import annotations

import math

import pytest

from load_tests.eval.metrics import (
    agreement,
    exact_match,
    f1,
    lcs_length,
    mean_ci95,
    normalize_answer,
    paired_diff_ci95,
    rouge_l,
    rouge_tokens,
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("The Eiffel Tower!", "eiffel tower"),
        ("  an   apple, a day ", "apple day"),
        ("Theater of the Absurd", "theater of absurd"),  # "the" only as a whole word
        ("Phineas 's sister", "phineas s sister"),
    ],
)
def test_normalize_answer(text: str, expected: str) -> None:
    assert normalize_answer(text) == expected


def test_exact_match_is_normalized_and_takes_any_answer() -> None:
    assert exact_match("The Denver Broncos.", ["Denver Broncos", "Broncos"]) == 1.0
    assert exact_match("broncos", ["Denver Broncos", "Broncos"]) == 1.0
    assert exact_match("Denver", ["Denver Broncos"]) == 0.0


@pytest.mark.parametrize(
    ("prediction", "answers", "expected"),
    [
        # "cat sat on mat" vs "cat on mat": 3 common, P = 3/4, R = 1 -> 6/7
        ("the cat sat on the mat", ["a cat on a mat"], 6 / 7),
        # one common token each: P = 1/2, R = 1 -> 2/3; the max over answers is kept
        ("Denver Broncos", ["Broncos", "Denver"], 2 / 3),
        ("Denver Broncos", ["Carolina Panthers", "the Denver Broncos"], 1.0),
        # counts clip: x x y vs x y y share one x and one y -> P = R = 2/3
        ("x x y", ["x y y"], 2 / 3),
        ("Paris", ["London"], 0.0),
        ("", ["London"], 0.0),
        ("the", ["a"], 1.0),  # both normalize to nothing (SQuAD 2.0 convention)
    ],
)
def test_f1_hand_worked(prediction: str, answers: list[str], expected: float) -> None:
    assert f1(prediction, answers) == pytest.approx(expected)


def test_answers_must_be_a_list() -> None:
    with pytest.raises(ValueError):
        f1("Paris", "Paris")
    with pytest.raises(ValueError):
        exact_match("Paris", [])


def test_lcs_length_textbook() -> None:
    assert lcs_length(list("ABCBDAB"), list("BDCABA")) == 4
    assert lcs_length([], ["a"]) == 0


def test_rouge_tokens_split_on_non_alphanumerics() -> None:
    assert rouge_tokens("Hello, World! It's £37.5m") == ["hello", "world", "it", "s", "37", "5m"]


@pytest.mark.parametrize(
    ("prediction", "reference", "expected"),
    [
        # LCS "the cat on the mat" = 5 of 6 tokens on both sides
        ("the cat sat on the mat", "the cat was on the mat", 5 / 6),
        # Lin's example: LCS "the gunman" = 2; P = 2/4, R = 2/6 -> F = 0.4
        ("police killed the gunman", "the gunman was killed by police", 0.4),
        ("Hello, World!", "hello world", 1.0),
        ("", "hello world", 0.0),
        ("alpha beta", "gamma delta", 0.0),
    ],
)
def test_rouge_l_hand_computed(prediction: str, reference: str, expected: float) -> None:
    assert rouge_l(prediction, reference) == pytest.approx(expected)


def test_mean_ci95_known_data() -> None:
    # mean 3, sample variance 2.5, standard error sqrt(0.5), half width 1.95996 * 0.70711
    mean, low, high = mean_ci95([1.0, 2.0, 3.0, 4.0, 5.0])
    assert mean == pytest.approx(3.0)
    assert low == pytest.approx(3.0 - 1.385904, abs=1e-6)
    assert high == pytest.approx(3.0 + 1.385904, abs=1e-6)
    assert mean_ci95([0.5] * 10) == pytest.approx((0.5, 0.5, 0.5))


def test_mean_ci95_edge_cases() -> None:
    mean, low, high = mean_ci95([0.7])
    assert mean == 0.7 and math.isnan(low) and math.isnan(high)
    with pytest.raises(ValueError):
        mean_ci95([])


def test_paired_diff_ci95() -> None:
    mean, low, high = paired_diff_ci95([1.0, 1.0, 0.0, 1.0], [1.0, 0.0, 0.0, 0.0])
    assert mean == pytest.approx(0.5)
    assert low < mean < high
    with pytest.raises(ValueError):
        paired_diff_ci95([1.0], [1.0, 0.0])


def test_agreement_is_normalized() -> None:
    assert agreement(["Paris", "the Louvre", "x"], ["paris.", "Louvre", "y"]) == pytest.approx(
        2 / 3
    )
    with pytest.raises(ValueError):
        agreement(["a"], [])
    with pytest.raises(ValueError):
        agreement([], [])
