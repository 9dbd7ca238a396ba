"""The served model as reranker (`retriever.search.query_likelihood`): its batched scores over
cached passage KV are a plain forward pass's, it reorders what the ranking found (the served
SmolLM2 puts the answering chunk first where the dense order does not), and the library hands
it the configured number of candidates."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch

from retriever.library.facade import Library
from retriever.search.passage_kv import PassageKV, PassageKVCache
from retriever.search.query_likelihood import PROMPT_HEAD, PROMPT_TAIL, QueryLikelihoodReranker
from retriever.search.ranking import Ranking
from tests.unit.gateway_fakes import CharTokenizer, WordEmbedder
from tests.unit.tenants import DEFAULT
from tests.unit.test_retriever_keyword_search import CALM, CODE, PETS
from tests.unit.tiny_llama import tiny_llama

MODEL_DIR = Path(__file__).resolve().parents[2] / "data" / "models" / "smollm2-135m-instruct"


class ByteTokenizer:
    """One token per byte, below the tiny model's 128 ids."""

    def __call__(self, text: str, add_special_tokens: bool = False) -> dict[str, list[int]]:
        return {"input_ids": [byte % 128 for byte in text.encode()]}


def reference_score(model, tokenizer, passage: str, query: str) -> float:
    """The score from one plain forward pass over the whole prompt."""
    prefix = tokenizer(PROMPT_HEAD + passage + PROMPT_TAIL)["input_ids"]
    question = tokenizer(" " + query)["input_ids"]
    ids = torch.tensor([prefix + question])
    with torch.no_grad():
        logprobs = model(ids).logits[0].log_softmax(-1)
    scored = logprobs[len(prefix) - 1 : -1].gather(-1, torch.tensor(question)[:, None])
    return math.exp(scored.mean().item())


@pytest.mark.parametrize("cache_bytes", [1 << 30, 0])
def test_scores_over_cached_kv_are_a_plain_forward_passes(cache_bytes):
    model, tokenizer = tiny_llama(), ByteTokenizer()  # 4 query heads read 2 K/V heads
    reranker = QueryLikelihoodReranker(tiny_llama(), tokenizer, cache_bytes)
    passages = ["a short one", "a passage a good deal longer than the others", "mid length", ""]
    query = "what is it?"
    expected = [reference_score(model, tokenizer, passage, query) for passage in passages]
    first = reranker.scores(query, passages)  # all computed, in one left-padded batch
    again = reranker.scores(query, [passages[1], "new", passages[0]])  # cached and new mixed
    assert first == pytest.approx(expected, rel=1e-4)
    assert again == pytest.approx(
        [expected[1], reference_score(model, tokenizer, "new", query), expected[0]], rel=1e-4
    )
    assert all(0 < score <= 1 for score in first)
    assert len(reranker._cache) == (5 if cache_bytes else 0)
    assert reranker.scores(query, []) == []


def test_the_passage_cache_evicts_least_recently_used_within_its_bytes():
    def entry() -> PassageKV:
        return PassageKV((torch.zeros(1, 4, 2),), (torch.zeros(1, 4, 2),), torch.zeros(8))

    size = entry().nbytes
    cache = PassageKVCache(max_bytes=2 * size)
    cache.put("a", entry())
    cache.put("b", entry())
    assert cache.get("a") is not None  # now "b" is the least recently used
    cache.put("c", entry())
    assert (cache.get("a") is not None, cache.get("b"), cache.get("c") is not None) == (
        True,
        None,
        True,
    )


def test_the_served_model_puts_the_answer_first_where_the_dense_order_does_not(tmp_path):
    # Checked when run, not collected: in a fresh clone the integration servers, which run
    # first, provision the model.
    if not MODEL_DIR.is_dir():
        pytest.skip(f"the served model is not in {MODEL_DIR}")
    reranker = QueryLikelihoodReranker.load(MODEL_DIR, cache_bytes=64 << 20)
    library = Library(tmp_path / "library", CharTokenizer(), WordEmbedder(), reranker=reranker)
    try:
        library.ingest([CODE, CALM, PETS], tenant=DEFAULT)
        question = "Which fault code shows when the pump valve sticks?"
        dense = library.search(question, 3, ranking=Ranking(rerank=False), tenant=DEFAULT)
        # The stand-in embedder sees only cat/dog/sky/sea: the pets come first.
        assert dense[0].document_id == "pets"
        reranked = library.search(question, 3, tenant=DEFAULT)
        assert reranked[0].document_id == "pump"
        assert 1 >= reranked[0].score > reranked[1].score >= reranked[2].score > 0
    finally:
        library.close()


class CountingReranker:
    """Scores texts by length, shortest best, and records how many it was handed."""

    def __init__(self) -> None:
        self.handed: list[int] = []

    def scores(self, query: str, texts: list[str]) -> list[float]:
        self.handed.append(len(texts))
        return [1 / len(text) for text in texts]


def test_the_library_reranks_its_configured_candidates_and_at_least_top_k(tmp_path):
    counting = CountingReranker()
    library = Library(
        tmp_path / "library",
        CharTokenizer(),
        WordEmbedder(),
        reranker=counting,
        rerank_candidates=2,
    )
    try:
        library.ingest([CODE, CALM, PETS], tenant=DEFAULT)
        assert len(library.search("cat", 1, tenant=DEFAULT)) == 1
        assert len(library.search("cat", 3, tenant=DEFAULT)) == 3
        library.search("cat", 3, ranking=Ranking(rerank=False), tenant=DEFAULT)
        assert counting.handed == [2, 3]  # 2 candidates, 3 for top_k 3; none unreranked
    finally:
        library.close()
