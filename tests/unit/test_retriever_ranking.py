"""Reciprocal rank fusion against a written-out reference, the words a keyword search asks for,
and which searches a ranking runs."""

import pytest

from retriever.search.fusion import RRF_K, reciprocal_rank_fusion
from retriever.search.keywords import MAX_TERMS, keyword_terms
from retriever.search.ranking import FUSION_DEPTH, Ranking, ranked_chunks


def reference_fusion(rankings, weights, k=RRF_K):
    """Cormack et al.'s formula, spelled out one id at a time."""
    ids = []
    for ranking, weight in zip(rankings, weights, strict=True):
        ids += [chunk_id for chunk_id in ranking if weight and chunk_id not in ids]
    top = sum(weight / (k + 1) for weight in weights)
    scores = {
        chunk_id: sum(
            weight / (k + ranking.index(chunk_id) + 1)
            for ranking, weight in zip(rankings, weights, strict=True)
            if chunk_id in ranking
        )
        / top
        for chunk_id in ids
    }
    return sorted(scores.items(), key=lambda item: -item[1])


@pytest.mark.parametrize(
    ("rankings", "weights"),
    [
        ([[1, 2, 3], [3, 1, 4]], [1.0, 1.0]),
        ([[1, 2, 3], [3, 1, 4]], [0.3, 0.7]),
        ([[5, 6], []], [1.0, 1.0]),
        ([[5, 6], [7, 8, 5]], [0.0, 2.0]),
        ([list(range(50)), list(range(49, -1, -1))], [1.0, 1.0]),
    ],
)
def test_fusion_matches_the_reference(rankings, weights):
    fused = reciprocal_rank_fusion(rankings, weights)
    expected = reference_fusion(rankings, weights)
    assert [chunk_id for chunk_id, _ in fused] == [chunk_id for chunk_id, _ in expected]
    assert [score for _, score in fused] == pytest.approx([score for _, score in expected])


def test_fused_scores_run_from_one_for_first_in_every_list():
    fused = dict(reciprocal_rank_fusion([[1, 2], [1, 3]], [1.0, 1.0]))
    assert fused[1] == pytest.approx(1.0)
    assert fused[2] == pytest.approx(fused[3]) and 0.49 < fused[2] < 0.5
    only_one = dict(reciprocal_rank_fusion([[9], []], [1.0, 1.0]))
    assert only_one[9] == pytest.approx(0.5)


@pytest.mark.parametrize("weights", [[0.0, 0.0], [-1.0, 1.0], [1.0]])
def test_bad_weights_are_refused(weights):
    with pytest.raises(ValueError):
        reciprocal_rank_fusion([[1], [2]], weights)


def test_keyword_terms_are_the_distinct_words_in_order():
    assert keyword_terms("Fault F-2291: the F-2291 valve (Ünïcode)") == [
        "fault",
        "f",
        "2291",
        "valve",
        "ünïcode",
    ]
    assert keyword_terms("?! -- ...") == []
    assert keyword_terms("What is the name of it?") == ["name"]  # stop words are left out
    assert keyword_terms("Who wrote Charlotte's Web? We'll see") == [
        "wrote",
        "charlotte",
        "web",
        "see",
    ]
    assert len(keyword_terms(" ".join(f"w{i}" for i in range(200)))) == MAX_TERMS


def searches(log):
    def dense(n):
        log.append(("dense", n))
        return [(1, 0.9), (2, 0.8), (3, 0.7)][:n]

    def keyword(n):
        log.append(("keyword", n))
        return [(3, 12.0), (4, 3.0)][:n]

    return dense, keyword


def test_dense_ranking_runs_no_keyword_search_and_keeps_cosine_scores():
    log = []
    assert ranked_chunks(Ranking(), 2, *searches(log)) == [(1, 0.9), (2, 0.8)]
    assert log == [("dense", 2)]


def test_hybrid_ranking_fuses_deeper_lists():
    log = []
    found = ranked_chunks(Ranking(1.0, 1.0), 2, *searches(log))
    assert [chunk_id for chunk_id, _ in found] == [3, 1]  # 3 is in both lists
    assert sorted(log) == [("dense", FUSION_DEPTH), ("keyword", FUSION_DEPTH)]  # at once


def test_keyword_only_ranking_runs_no_dense_search():
    log = []
    found = ranked_chunks(Ranking(0.0, 1.0), 5, *searches(log))
    assert [chunk_id for chunk_id, _ in found] == [3, 4]
    assert log == [("keyword", FUSION_DEPTH)]


@pytest.mark.parametrize("weights", [(0.0, 0.0), (-1.0, 1.0), (float("nan"), 1.0)])
def test_a_ranking_needs_a_weight(weights):
    with pytest.raises(ValueError):
        Ranking(*weights)
