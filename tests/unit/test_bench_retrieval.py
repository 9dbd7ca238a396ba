"""The retrieval benchmark's scores against a hand-worked example, and its sampling."""

import pytest

from load_tests.bench_retrieval import gold_rank, retrieval_scores, sample
from load_tests.eval.datasets import QAItem


def test_gold_rank_counts_distinct_documents():
    assert gold_rank(["a", "a", "b", "c"], "c") == 3  # two chunks of "a" are one document
    assert gold_rank(["a", "b"], "z") is None


def test_scores_match_a_hand_worked_example():
    ranks = [1, 3, None, 7, 2]
    scores = retrieval_scores(ranks)
    assert scores["recall@1"] == pytest.approx(1 / 5)
    assert scores["recall@5"] == pytest.approx(3 / 5)
    assert scores["recall@10"] == pytest.approx(4 / 5)
    assert scores["mrr"] == pytest.approx((1 + 1 / 3 + 0 + 1 / 7 + 1 / 2) / 5)
    with pytest.raises(ValueError):
        retrieval_scores([])


def test_sample_asks_only_about_kept_passages():
    items = [QAItem(f"q{n}", f"question {n}", f"passage {n % 4}", ["x"]) for n in range(12)]
    passages, asked = sample(items, passages=2, questions=5, seed=1)
    assert passages == ["passage 0", "passage 1"]
    assert len(asked) == 5 and {item.passage for item in asked} <= set(passages)
    assert sample(items, 2, 5, seed=1)[1] == asked  # the seed fixes the sample
