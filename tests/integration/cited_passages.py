"""Passages with metadata, and the checks of chat's ``retrieval.filters`` and citations over them
(`test_server_lives.py` runs them before and after a restart): a filter on documents' metadata
chooses what is retrieved, each source's ``[start_char, end_char)`` slices the ingested text to
exactly its chunk, and a malformed filter is a 400 naming its part."""

from __future__ import annotations

from typing import Any

import httpx

from tests.integration.conftest import Server

QUESTION = "Who keeps the tide tables of Zembla's harbour?"
ONE_CHUNK_EACH = {
    "type": "static",
    "static": {"max_chunk_size_tokens": 100, "chunk_overlap_tokens": 0},
}
"""Each paragraph below is 56 of SmolLM2's tokens: two never share a chunk of 100."""


def _paragraphs(place: str, city: str) -> list[str]:
    return [
        f"Section {n} of the {place} handbook. The harbour master of {place} keeps the tide "
        f"tables, the ferry timetable and the list of pilots for the port of {city}; ask at the "
        "office by the lighthouse, open every morning except on market days."
        for n in range(3)
    ]


PARAGRAPHS = {
    "zembla": _paragraphs("Zembla", "Onhava"),
    "ruritania": _paragraphs("Ruritania", "Strelsau"),
    "bare": _paragraphs("Graustark", "Edelweiss"),
}
METADATA = {"zembla": {"team": "ops", "year": 2024}, "ruritania": {"team": "dev"}}
"""`bare` is ingested without metadata."""
Citation = tuple[str, int, int, int]
"""A source: its document, chunk index, start and end characters."""


def _ask(client: httpx.Client, server: Server, filters: Any) -> httpx.Response:
    body = {
        "model": server.model,
        "messages": [{"role": "user", "content": QUESTION}],
        "retrieval": {"top_k": 3, "filters": filters},
        "max_tokens": 4,
        "temperature": 0,
    }
    return client.post("/v1/chat/completions", json=body)


def _cited(client: httpx.Client, server: Server, filters: Any) -> list[Citation]:
    """The answer's sources, each checked to slice its document's text to its paragraph."""
    reply = _ask(client, server, filters)
    assert reply.status_code == 200, reply.text
    cited = []
    for source in reply.json()["retrieval"]:
        document, index = source["document_id"], source["chunk_index"]
        text = "\n\n".join(PARAGRAPHS[document])
        start, end = source["start_char"], source["end_char"]
        assert text[start:end] == PARAGRAPHS[document][index], source
        cited.append((document, index, start, end))
    return cited


def checked_citations(client: httpx.Client, server: Server) -> list[list[Citation]]:
    """The sources of two filtered questions, each checked, after an empty and a refused one."""
    dev = _cited(client, server, {"type": "eq", "key": "team", "value": "dev"})
    assert {document for document, *_ in dev} == {"ruritania"} and len(dev) == 3
    not_dev = _cited(client, server, {"type": "ne", "key": "team", "value": "dev"})
    assert {document for document, *_ in not_dev} <= {"zembla", "bare"}
    assert not_dev[0][0] == "zembla"  # the question names it
    newer = {
        "type": "and",
        "filters": [
            {"type": "eq", "key": "team", "value": "ops"},
            {"type": "gte", "key": "year", "value": 2025},
        ],
    }
    assert _cited(client, server, newer) == []
    malformed = {"type": "or", "filters": [{"type": "in", "key": "team", "value": "dev"}]}
    refused = _ask(client, server, malformed)
    assert refused.status_code == 400, refused.text
    assert refused.json()["error"]["param"] == "retrieval.filters.filters.0.value"
    return [dev, not_dev]


def ingest_passages(client: httpx.Client) -> None:
    """`PARAGRAPHS` as three documents of one chunk per paragraph."""
    documents = [
        {"id": name, "text": "\n\n".join(paragraphs)}
        | ({"metadata": METADATA[name]} if name in METADATA else {})
        for name, paragraphs in PARAGRAPHS.items()
    ]
    body = {"documents": documents, "chunking_strategy": ONE_CHUNK_EACH}
    reply = client.post("/v1/documents", json=body)
    assert reply.status_code == 200, reply.text
    assert [document["num_chunks"] for document in reply.json()["data"]] == [3, 3, 3]
