"""The RAG load test's document popularity and synthetic documents."""

from __future__ import annotations

from collections import Counter

import pytest

from load_tests.rag_load import (
    mixed_questions,
    question_blocks,
    synthetic_document,
    zipf_choices,
)


def test_zipf_popularity_falls_with_rank_and_is_reproducible() -> None:
    picks = zipf_choices(10, 20_000, exponent=1.1, seed=3)
    counts = Counter(picks)
    assert set(counts) <= set(range(10))
    assert counts[0] > counts[1] > counts[4] > counts[9]
    assert counts[0] / len(picks) > 0.3
    assert picks == zipf_choices(10, 20_000, exponent=1.1, seed=3)


def test_synthetic_documents_state_their_fact_and_differ() -> None:
    first, second = synthetic_document(1), synthetic_document(2)
    document_id, text = first
    assert document_id == "load-1"
    assert text.startswith("The capital of Region 1 is Town0001.")
    assert first[1] != second[1]
    assert synthetic_document(1) == first


def test_mixed_questions_ask_about_consecutive_picks() -> None:
    assert mixed_questions([3, 1, 4, 4, 5], facts=2) == [
        "What are the capitals of Region 3 and Region 1?",
        "What is the capital of Region 4?",
    ]
    assert mixed_questions([7, 2], facts=1) == [
        "What is the capital of Region 7?",
        "What is the capital of Region 2?",
    ]


def test_question_blocks_give_each_run_its_own_questions() -> None:
    questions = [f"q{index}" for index in range(10)]
    blocks = question_blocks(questions, 3)
    assert blocks == [["q0", "q1", "q2"], ["q3", "q4", "q5"], ["q6", "q7", "q8"]]
    with pytest.raises(ValueError, match="cannot fill"):
        question_blocks(questions[:2], 3)
