"""The served-model reranker against the real server (`RAGBLEND_RERANKER=served-model`): chat's
``retrieval`` comes back reordered by the reranker, with its scores, unless the request's
``ranking_options.ranker`` says ``none``; asking for it by name is served too."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.integration.conftest import Server, running_server

pytestmark = pytest.mark.integration

QUESTION = "Which fault code shows when the pump valve sticks?"
DOCUMENTS = [
    {"id": "pump", "text": "The sea pump shows fault F-2291 when its valve sticks in the cold."},
    {"id": "calm", "text": "The sea was calm and the sea was grey under a sea of cloud."},
    {"id": "pets", "text": "A cat and a dog share the garden; the dog digs and the cat naps."},
]


def _sources(client: httpx.Client, server: Server, ranking: dict[str, Any]) -> list[Any]:
    retrieval = {"top_k": 3, "ranking_options": ranking}
    messages = [{"role": "user", "content": QUESTION}]
    body = {"model": server.model, "messages": messages, "retrieval": retrieval, "max_tokens": 1}
    reply = client.post("/v1/chat/completions", json=body)
    assert reply.status_code == 200, reply.text
    return [(source["document_id"], source["score"]) for source in reply.json()["retrieval"]]


def test_chat_retrieval_is_reranked_by_the_served_model(tmp_path: Path) -> None:
    env = {"RAGBLEND_RERANKER": "served-model"}
    with running_server(tmp_path, env) as server, server.client() as client:
        reply = client.post("/v1/documents", json={"documents": DOCUMENTS})
        assert reply.status_code == 200, reply.text
        plain = _sources(client, server, {"ranker": "none"})
        reranked = _sources(client, server, {})
        assert reranked[0][0] == "pump"
        scores = [score for _, score in reranked]
        assert 1 >= scores[0] >= scores[1] >= scores[2] > 0
        assert scores != [score for _, score in plain]  # the reranker's, not the cosine
        assert _sources(client, server, {"ranker": "served-model"}) == reranked
