"""Neighbour contexts on the real server (SmolLM2, `RAGBLEND_CHUNK_CONTEXT=neighbours`): library
chunks are precomputed behind their nearest chunks, an ingest that joins their nearest ones has
them precomputed again in place (their documents stay cached meanwhile), and chat over the
library is answered from the stored chunks."""

from __future__ import annotations

import re
import time
from typing import Any

import httpx
import pytest

from tests.integration.conftest import Server

pytestmark = pytest.mark.integration

FILLER = "Its people farm the valleys, trade by river and hold a market every spring. "
WAIT_SECONDS = 180
OWN_SERVER = {"RAGBLEND_CHUNK_CONTEXT": "neighbours", "RAGBLEND_CHUNK_CONTEXT_NEIGHBOURS": "2"}


def _fact(place: str, city: str) -> dict[str, str]:
    text = f"The capital of {place} is {city}.\n\n" + FILLER * 4
    return {"id": place.lower().replace(" ", "-"), "text": text}


def _metric(server: Server, name: str, result: str) -> float:
    text = httpx.get(f"{server.url}/metrics").text
    match = re.search(rf'^{name}{{result="{result}"}} (\S+)$', text, re.M)
    return float(match.group(1)) if match else 0.0


def _statuses(client: httpx.Client, *document_ids: str) -> list[str]:
    return [client.get(f"/v1/documents/{doc}").json()["status"] for doc in document_ids]


def _ingest(client: httpx.Client, *documents: dict[str, str]) -> None:
    reply = client.post("/v1/documents", json={"documents": list(documents)})
    assert reply.status_code == 200, reply.text


def _ask(
    client: httpx.Client, server: Server, question: str, documents: list[str] | None = None
) -> dict[str, Any]:
    """Over the library's top two chunks, or over ``documents`` sent with the question."""
    source: dict[str, Any] = {"retrieval": {"top_k": 2}}
    if documents is not None:
        source = {"documents": documents}
    body = {
        "model": server.model,
        "messages": [{"role": "user", "content": question}],
        **source,
        "max_tokens": 16,
        "temperature": 0,
    }
    reply = client.post("/v1/chat/completions", json=body)
    assert reply.status_code == 200, reply.text
    return reply.json()


def test_a_chunk_is_precomputed_again_when_new_chunks_join_its_neighbours(
    own_server: Server,
) -> None:
    first, second = _fact("Freedonia", "Fredville"), _fact("Sylvania", "Sylvaport")
    third = _fact("Grand Fenwick", "Fenwick Town")
    facts = {fact["id"]: fact["text"] for fact in (first, second, third)}
    with own_server.client() as client:
        _ingest(client, first, second)
        deadline = time.monotonic() + WAIT_SECONDS
        while _statuses(client, "freedonia", "sylvania") != ["cached", "cached"]:
            assert time.monotonic() < deadline, "the first documents were never cached"
            time.sleep(0.2)
        stored = _metric(own_server, "ragblend_precomputed_chunks_total", "miss")
        assert stored == 2
        assert _metric(own_server, "ragblend_chunk_context_refreshes_total", "replaced") == 0

        # Each old chunk had one other chunk; the new one joins both their nearest two.
        _ingest(client, third)
        while _metric(own_server, "ragblend_chunk_context_refreshes_total", "replaced") < 2:
            assert time.monotonic() < deadline, "the old chunks were never precomputed again"
            assert _statuses(client, "freedonia", "sylvania") == ["cached", "cached"]
            time.sleep(0.2)
        while _statuses(client, "grand-fenwick") != ["cached"]:
            assert time.monotonic() < deadline, "the new document was never cached"
            time.sleep(0.2)
        # Replaced entries were computed and stored anew: misses, like the first three.
        assert _metric(own_server, "ragblend_precomputed_chunks_total", "miss") == stored + 3
        assert _metric(own_server, "ragblend_chunk_context_refreshes_total", "failed") == 0

        reply = _ask(client, own_server, "What is the capital of Freedonia?")
        assert _statuses(client, "freedonia", "sylvania") == ["cached", "cached"]
        texts = [facts[source["document_id"]] for source in reversed(reply["retrieval"])]
        sent = _ask(client, own_server, "What is the capital of Freedonia?", documents=texts)
    sources = reply["retrieval"]
    assert sources[0]["document_id"] == "freedonia"
    assert "Fredville" in reply["choices"][0]["message"]["content"]
    assert reply["blend"]["chunks_hit"] == len(sources)
    assert reply["blend"]["chunks_missed"] == 0
    # Chunks in neighbour contexts take their own recipe (ratio 0.15 against sent documents' 0.3).
    assert sent["blend"]["chunks_hit"] + sent["blend"]["chunks_missed"] == len(sources)
    assert reply["blend"]["recomputed_tokens"] < sent["blend"]["recomputed_tokens"]
