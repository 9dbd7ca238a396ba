"""The end-to-end retrieval benchmark: what it asks the server, and its per-ranking summary."""

import pytest

from load_tests.bench_retrieval import RANKINGS
from load_tests.bench_retrieval_answers import chat_body, ranking_turns, summarize


def test_every_ranking_goes_first_in_turn():
    turns = [ranking_turns(index) for index in range(3)]
    assert [order[0] for order in turns] == ["dense", "keyword", "hybrid"]
    assert all(sorted(order) == sorted(RANKINGS) for order in turns)


def test_a_request_retrieves_with_the_rankings_weights():
    body = chat_body("m", "Who wrote it?", "keyword", None)
    weights = body["retrieval"]["ranking_options"]["hybrid_search"]
    assert weights == {"embedding_weight": 0.0, "text_weight": 1.0}
    assert "top_k" not in body["retrieval"]  # the server's default
    assert chat_body("m", "Who wrote it?", "dense", 3)["retrieval"]["top_k"] == 3
    assert "Who wrote it?" in body["messages"][-1]["content"]
    assert body["temperature"] == 0 and "documents" not in body


def _result(answer: str, f1: float, gold: bool) -> dict:
    return {"answer": answer, "f1": f1, "gold_retrieved": gold, "chunks": 6, "seconds": 2.0}


def test_summary_pairs_each_ranking_with_dense():
    records = [
        {
            "id": "a",
            "dense": _result("Paris", 1.0, True),
            "keyword": _result("Lyon", 0.0, False),
            "hybrid": _result("Paris", 1.0, True),
        },
        {
            "id": "b",
            "dense": _result("Rome", 0.0, False),
            "keyword": _result("Oslo", 1.0, True),
            "hybrid": _result("Oslo", 1.0, True),
        },
    ]
    rows = {row["ranking"]: row for row in summarize(records)}
    assert rows["dense"]["f1"][0] == pytest.approx(0.5)
    assert rows["dense"]["gap_to_dense"][0] == 0.0
    assert rows["hybrid"]["gap_to_dense"][0] == pytest.approx(0.5)
    assert rows["hybrid"]["gold_recall"] == 1.0 and rows["keyword"]["gold_recall"] == 0.5
    assert rows["keyword"]["agree_with_dense"] == 0.0
    assert rows["hybrid"]["agree_with_dense"] == 0.5
