"""OpenAI's ``ranking_options`` as a client sees them: on vector store search over HTTP, on the
``file_search`` tool and on chat's ``retrieval``, with the server's default ranking and top_k
(a real SQLite library, stand-ins for the engine and the embedder)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from gateway.http.errors import APIError
from gateway.openai.protocol import ChatCompletionRequest
from gateway.openai.response_request import parse_turn
from gateway.serve.chunk_sources import request_chunks
from retriever import STORE_FILE, Library, RagObjects
from tests.unit.gateway_fakes import CharTokenizer, WordEmbedder, client, ready_app
from tests.unit.test_retriever_keyword_search import CALM, CODE, PETS, QUESTION, LengthReranker

HYBRID = {"hybrid_search": {"embedding_weight": 1, "text_weight": 1}}


@pytest.fixture(params=[{}])
def served(request, tmp_path) -> Iterator[tuple[TestClient, Any]]:
    """A client of an app whose library holds the three test documents, each an uploaded file
    in one vector store; and the vector store's id."""
    app = ready_app(data_dir=tmp_path, retrieval_top_k=2, **request.param)
    state = app.state.ragblend
    state.library = Library(tmp_path / "library", CharTokenizer(), WordEmbedder(), chunk_tokens=400)
    state.rag_objects = RagObjects(tmp_path / "library" / STORE_FILE)
    http = client(app)
    file_ids = []
    for document in (CODE, CALM, PETS):
        upload = {"file": (f"{document.id}.txt", document.text.encode(), "text/plain")}
        reply = http.post("/v1/files", files=upload, data={"purpose": "assistants"})
        assert reply.status_code == 200, reply.text
        file_ids.append(reply.json()["id"])
    store = http.post("/v1/vector_stores", json={"name": "s", "file_ids": file_ids}).json()
    yield http, store["id"]
    state.rag_objects.close()
    state.library.close()


def search(served, **body: Any) -> list[tuple[str, float]]:
    http, store_id = served
    reply = http.post(f"/v1/vector_stores/{store_id}/search", json={"query": QUESTION, **body})
    assert reply.status_code == 200, reply.text
    return [(hit["filename"].removesuffix(".txt"), hit["score"]) for hit in reply.json()["data"]]


def names(results: list[tuple[str, float]]) -> list[str]:
    return [name for name, _ in results]


def test_hybrid_search_weights_change_the_ranking(served):
    dense = search(served)
    assert names(dense) == ["pets", "pump", "calm"]  # the stand-in embedder misses the code
    assert search(served, ranking_options={"ranker": "none"}) == dense
    hybrid = search(served, ranking_options=HYBRID)
    assert names(hybrid) == ["pump", "pets", "calm"]
    assert hybrid[1][1] == pytest.approx(0.5)  # first by embedding only
    no_text = {"hybrid_search": {"embedding_weight": 1, "text_weight": 0}}
    assert search(served, ranking_options=no_text) == dense
    keywords = {"hybrid_search": {"embedding_weight": 0, "text_weight": 1}}
    assert names(search(served, ranking_options=keywords)) == ["pump"]


def test_score_threshold_applies_to_the_fused_score(served):
    kept = search(served, ranking_options={**HYBRID, "score_threshold": 0.9})
    assert names(kept) == ["pump"]


@pytest.mark.parametrize("served", [{"retrieval_ranking": "hybrid"}], indirect=True)
def test_the_server_default_ranking_is_a_setting(served):
    assert names(search(served))[0] == "pump"
    dense = {"hybrid_search": {"embedding_weight": 1, "text_weight": 0}}
    assert names(search(served, ranking_options=dense))[0] == "pets"


@pytest.mark.parametrize(
    ("extra", "param"),
    [
        ({"ranking_options": {"ranker": "default-2024-11-15"}}, "ranking_options.ranker"),
        ({"ranking_options": {"ranker": "best"}}, "ranking_options.ranker"),
        ({"ranking_options": {"ranker": "served-model"}}, "ranking_options.ranker"),  # not loaded
        ({"ranking_options": {"score_threshold": 1.5}}, "ranking_options.score_threshold"),
        (
            {"ranking_options": {"hybrid_search": {"embedding_weight": 0, "text_weight": 0}}},
            "ranking_options.hybrid_search",
        ),
        (
            {"ranking_options": {"hybrid_search": {"embedding_weight": -1, "text_weight": 1}}},
            "ranking_options.hybrid_search.embedding_weight",
        ),
        ({"ranking_options": {"rerank": True}}, "ranking_options.rerank"),
        ({"rewrite_query": True}, "rewrite_query"),
    ],
)
def test_options_ragblend_cannot_honour_are_400s_naming_them(served, extra, param):
    http, store_id = served
    body = {"query": QUESTION, **extra}
    reply = http.post(f"/v1/vector_stores/{store_id}/search", json=body)
    assert reply.status_code == 400, reply.text
    assert reply.json()["error"]["param"] == param


@pytest.mark.parametrize("served", [{"reranker": "served-model"}], indirect=True)
def test_the_server_reranker_reranks_unless_a_request_says_none(served):
    http, _ = served
    http.app.state.ragblend.library.reranker = LengthReranker()  # as loading puts the real one
    dense = names(search(served, ranking_options={"ranker": "none"}))
    assert dense == ["pets", "pump", "calm"]  # as without a reranker
    reranked = search(served)
    assert names(reranked) == ["calm", "pets", "pump"]  # shortest first, with its scores
    assert reranked[0][1] == pytest.approx(1 / len(CALM.text))
    assert search(served, ranking_options={"ranker": "served-model"}) == reranked
    assert search(served, ranking_options={"ranker": "auto"}) == reranked
    assert retrieved(served, {}) == ["calm", "pets"]  # chat retrieval alike
    assert retrieved(served, {"ranking_options": {"ranker": "none"}}) == ["pets", "pump"]
    threshold = {"score_threshold": 1 / len(CALM.text)}  # on the reranker's scale
    assert names(search(served, ranking_options=threshold)) == ["calm"]


def test_file_search_takes_the_same_options():
    tool = {"type": "file_search", "vector_store_ids": ["vs_1"], "ranking_options": HYBRID}
    turn = parse_turn({"model": "m", "input": "q", "tools": [tool]}, 6)
    assert turn.file_search is not None and turn.file_search.ranking is not None
    assert turn.file_search.ranking.hybrid_search is not None
    tool["ranking_options"] = {"ranker": "default-2024-11-15"}
    with pytest.raises(APIError) as refused:
        parse_turn({"model": "m", "input": "q", "tools": [tool]}, 6)
    assert refused.value.param == "tools.0.ranking_options.ranker"


def retrieved(served, retrieval: dict[str, Any]) -> list[str]:
    http, _ = served
    messages = [{"role": "user", "content": QUESTION}]
    fields = ChatCompletionRequest(model="served", messages=messages, retrieval=retrieval)
    state = http.app.state.ragblend
    chunks = asyncio.run(
        request_chunks(None, fields.retrieval, QUESTION, state, state.tenant("default"))
    )
    assert chunks is not None
    files = [
        state.rag_objects.in_project(state.tenant("default")).files.get(source["document_id"])
        for source in chunks.sources
    ]
    return [file.filename.removesuffix(".txt") for file in files]  # a file's document: its id


def test_chat_retrieval_takes_the_server_top_k_and_ranking_options(served):
    assert retrieved(served, {}) == ["pets", "pump"]  # RAGBLEND_RETRIEVAL_TOP_K=2
    assert retrieved(served, {"top_k": 3}) == ["pets", "pump", "calm"]
    assert retrieved(served, {"ranking_options": HYBRID}) == ["pump", "pets"]
    with_threshold = {"ranking_options": {**HYBRID, "score_threshold": 0.9}}
    assert retrieved(served, with_threshold) == ["pump"]


@pytest.mark.parametrize(
    ("retrieval", "param"),
    [
        ({"min_score": 0.1, "ranking_options": {"score_threshold": 0.5}}, "retrieval"),
        ({"ranking_options": {"ranker": "default-2024-11-15"}}, "retrieval.ranking_options.ranker"),
        ({"ranking_options": {"ranker": "served-model"}}, "retrieval.ranking_options.ranker"),
    ],
)
def test_chat_retrieval_refuses_what_it_cannot_honour(served, retrieval, param):
    http, _ = served
    body = {"model": "served", "messages": [{"role": "user", "content": "q"}]}
    reply = http.post("/v1/chat/completions", json={**body, "retrieval": retrieval})
    assert reply.status_code == 400, reply.text
    assert reply.json()["error"]["param"] == param
