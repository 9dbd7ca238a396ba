"""Documents and a question for the served-model reranker (`RAGBLEND_RERANKER=served-model`), and
the sources chat's ``retrieval`` returns for them under a ``ranking_options``
(`test_server_lives.py` turns the reranker on at a restart)."""

from __future__ import annotations

from typing import Any

import httpx

from tests.integration.conftest import Server

QUESTION = "Which fault code shows when the pump valve sticks?"
DOCUMENTS = [
    {"id": "pump", "text": "The sea pump shows fault F-2291 when its valve sticks in the cold."},
    {"id": "calm", "text": "The sea was calm and the sea was grey under a sea of cloud."},
    {"id": "pets", "text": "A cat and a dog share the garden; the dog digs and the cat naps."},
]


def ranked_sources(client: httpx.Client, server: Server, ranking: dict[str, Any]) -> list[Any]:
    """The ``(document_id, score)`` of each source of an answer to `QUESTION`."""
    retrieval = {"top_k": 3, "ranking_options": ranking}
    messages = [{"role": "user", "content": QUESTION}]
    body = {"model": server.model, "messages": messages, "retrieval": retrieval, "max_tokens": 1}
    reply = client.post("/v1/chat/completions", json=body)
    assert reply.status_code == 200, reply.text
    return [(source["document_id"], source["score"]) for source in reply.json()["retrieval"]]
