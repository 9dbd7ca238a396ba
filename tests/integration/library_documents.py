"""Documents that each state one capital, ingested into a server's library and asked about over
retrieval: shared by the tests of ingest (`test_documents.py`) and of restarts
(`test_server_lives.py`)."""

from __future__ import annotations

import time
from typing import Any

import httpx

from tests.integration.conftest import Server

FILLER = "Its people farm the valleys, trade by river and hold a market every spring. "


def fact(place: str, city: str) -> str:
    return f"The capital of {place} is {city}.\n\n" + FILLER * 6


def ingest(client: httpx.Client, *documents: dict[str, Any]) -> list[dict[str, Any]]:
    reply = client.post("/v1/documents", json={"documents": list(documents)})
    assert reply.status_code == 200, reply.text
    return reply.json()["data"]


def wait_for_status(client: httpx.Client, document_id: str, status: str) -> dict[str, Any]:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        document = client.get(f"/v1/documents/{document_id}").json()
        if document["status"] == status:
            return document
        time.sleep(0.2)
    raise AssertionError(f"{document_id} never became {status}: {document}")


def ask(client: httpx.Client, server: Server, question: str, **retrieval: Any) -> dict[str, Any]:
    body = {
        "model": server.model,
        "messages": [{"role": "user", "content": question}],
        "retrieval": {"top_k": 2, **retrieval},
        "max_tokens": 16,
        "temperature": 0,
    }
    reply = client.post("/v1/chat/completions", json=body)
    assert reply.status_code == 200, reply.text
    return reply.json()
