"""Chat's and completions' ``retrieval.filters`` and the citations retrieval reports, as a client
sees them: documents ingested through ``/v1/documents`` (filtered on their ``metadata``) and files
uploaded through ``/v1/files`` (on their ``filename`` and ``file_id``), a real SQLite library, and
each source's ``[start_char, end_char)`` slicing the sent text to the chunk the prompt holds."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from gateway.openai.protocol import ChatCompletionRequest
from gateway.serve.chunk_sources import request_chunks
from retriever import STORE_FILE, Library, RagObjects
from tests.unit.gateway_fakes import CharTokenizer, WordEmbedder, client, ready_app

QUESTION = "Where do the cat and the dog sleep?"
HANDBOOK = "\n\n".join(
    f"Rule {n}: the cat sleeps by the sea and the dog sleeps under the sky, section {n}."
    for n in range(4)
)
DOCUMENTS = [
    {"id": "handbook", "text": HANDBOOK, "metadata": {"team": "ops", "year": 2024}},
    {
        "id": "notes",
        "text": "The cat and the dog sleep; the cat and the dog sleep.",
        "metadata": {"team": "dev"},
    },
    {"id": "bare", "text": "A dog sleeps; a cat sleeps."},
]
UPLOAD = "Upload: the cat and the dog sleep on the mat."


@pytest.fixture
def served(tmp_path) -> Iterator[tuple[TestClient, str]]:
    """A client of an app whose library holds `DOCUMENTS` (chunks of 100 tokens overlapping by
    20) and one uploaded file; and the file's id."""
    app = ready_app(data_dir=tmp_path, retrieval_top_k=2)
    state = app.state.ragblend
    state.library = Library(tmp_path / "library", CharTokenizer(), WordEmbedder(), chunk_tokens=400)
    state.rag_objects = RagObjects(tmp_path / "library" / STORE_FILE)
    http = client(app)
    small = {"type": "static", "static": {"max_chunk_size_tokens": 100, "chunk_overlap_tokens": 20}}
    reply = http.post("/v1/documents", json={"documents": DOCUMENTS, "chunking_strategy": small})
    assert reply.status_code == 200, reply.text
    upload = {"file": ("mat.txt", UPLOAD.encode(), "text/plain")}
    reply = http.post("/v1/files", files=upload, data={"purpose": "assistants"})
    assert reply.status_code == 200, reply.text
    yield http, reply.json()["id"]
    state.rag_objects.close()
    state.library.close()


def sources(served, retrieval: dict[str, Any]) -> list[dict[str, Any]]:
    """What chat's ``retrieval`` cites, each source checked against the chunk it placed."""
    http, _ = served
    messages = [{"role": "user", "content": QUESTION}]
    fields = ChatCompletionRequest(model="served", messages=messages, retrieval=retrieval)
    state = http.app.state.ragblend
    chunks = asyncio.run(
        request_chunks(None, fields.retrieval, QUESTION, state, state.tenant("default"))
    )
    assert chunks is not None and chunks.sources is not None
    texts = {document["id"]: document["text"] for document in DOCUMENTS}
    for source, token_ids in zip(chunks.sources, chunks.token_ids, strict=True):
        text = texts.get(source["document_id"], UPLOAD)
        placed = state.tokenizer.decode(token_ids)
        assert text[source["start_char"] : source["end_char"]] == placed, source
    return chunks.sources


def test_filters_choose_the_documents_chat_retrieval_cites(served):
    assert "handbook" not in {s["document_id"] for s in sources(served, {"top_k": 2})}
    ops = {"type": "eq", "key": "team", "value": "ops"}
    cited = sources(served, {"top_k": 2, "filters": ops})
    assert [s["document_id"] for s in cited] == ["handbook", "handbook"]
    assert len({s["chunk_index"] for s in cited}) == 2
    everything = sources(served, {"top_k": 64, "filters": ops})
    assert sorted(s["chunk_index"] for s in everything) == [0, 1, 2, 3]
    assert min(everything, key=lambda s: s["chunk_index"])["start_char"] == 0
    not_ops = {"type": "ne", "key": "team", "value": "ops"}
    others = {s["document_id"] for s in sources(served, {"top_k": 64, "filters": not_ops})}
    assert "handbook" not in others and {"notes", "bare"} <= others
    newer = {"type": "and", "filters": [ops, {"type": "gt", "key": "year", "value": 2024}]}
    assert sources(served, {"filters": newer}) == []


def test_an_uploaded_files_document_is_filtered_on_its_filename_and_file_id(served):
    _, file_id = served
    by_name = {"type": "eq", "key": "filename", "value": "mat.txt"}
    [cited] = sources(served, {"filters": by_name})
    assert (cited["document_id"], cited["start_char"], cited["end_char"]) == (
        file_id,
        0,
        len(UPLOAD),
    )
    by_id = {"type": "in", "key": "file_id", "value": [file_id, "file-other"]}
    assert sources(served, {"filters": by_id}) == [cited]


@pytest.mark.parametrize("route", ["/v1/chat/completions", "/v1/completions"])
@pytest.mark.parametrize(
    ("filters", "param"),
    [
        ("team", "retrieval.filters"),
        ({"type": "eq", "key": "team"}, "retrieval.filters.value"),
        ({"type": "like", "key": "team", "value": "o"}, "retrieval.filters.type"),
        ({"type": "in", "key": "team", "value": "ops"}, "retrieval.filters.value"),
        (
            {"type": "and", "filters": [{"type": "eq", "key": 3, "value": 1}]},
            "retrieval.filters.filters.0.key",
        ),
    ],
)
def test_malformed_filters_are_400s_naming_the_part(served, route, filters, param):
    http, _ = served
    ask = (
        {"prompt": QUESTION}
        if route == "/v1/completions"
        else {"messages": [{"role": "user", "content": QUESTION}]}
    )
    reply = http.post(route, json={"model": "served", **ask, "retrieval": {"filters": filters}})
    assert reply.status_code == 400, reply.text
    error = reply.json()["error"]
    assert (error["type"], error["param"]) == ("invalid_request_error", param)
    assert http.get("/v1/documents").json()["total"] == len(DOCUMENTS) + 1
