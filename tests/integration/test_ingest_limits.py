"""Ingest limits before work, against the real server: streaming 413s, extraction that never
blocks the event loop, expansion budgets, and a large batch that does not hold up a small one."""

from __future__ import annotations

import json
import random
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import pytest

from tests.integration.conftest import MAX_DOCUMENT_BYTES, Server
from tests.unit.pdf_files import expanding_pdf, slow_pdf

pytestmark = pytest.mark.integration

MAX_DOCUMENTS_PER_REQUEST = 256  # the server's default
HEALTH_TIMEOUT = 5.0  # generous for /health, far below the slow PDF's reading time
WORDS = ("river", "valley", "market", "spring", "harvest", "bridge", "lantern", "orchard", "ferry")


def _total(client: httpx.Client) -> int:
    return client.get("/v1/documents").json()["total"]


def _novel(size: int) -> str:
    """About `size` bytes of paragraphs, different on every call."""
    rng = random.Random(uuid.uuid4().int)
    paragraphs = [f"Chronicle {uuid.uuid4()}."]
    while sum(len(paragraph) + 2 for paragraph in paragraphs) < size:
        paragraphs.append(" ".join(rng.choice(WORDS) for _ in range(60)) + ".")
    return "\n\n".join(paragraphs)[:size]


def _refused(client: httpx.Client, status: int, **request: Any) -> str:
    """POST to /v1/documents, expect `status` and an untouched store; returns the message."""
    before = _total(client)
    reply = client.post("/v1/documents", **request)
    assert reply.status_code == status, reply.text
    assert _total(client) == before
    return reply.json()["error"]["message"]


def test_an_oversized_upload_is_refused_and_stores_nothing(server: Server) -> None:
    files = [
        ("file", ("fine.txt", b"A file that would fit.", "text/plain")),
        ("file", ("big.txt", b"x" * (MAX_DOCUMENT_BYTES + 1), "text/plain")),
    ]
    with server.client() as client:
        message = _refused(client, 413, files=files)
        assert f"'big.txt' is larger than the limit of {MAX_DOCUMENT_BYTES}" in message
        assert client.get("/health").status_code == 200


def test_too_many_files_are_refused(server: Server) -> None:
    files = [
        ("file", (f"note-{index}.txt", f"Note {index} {uuid.uuid4()}".encode(), "text/plain"))
        for index in range(MAX_DOCUMENTS_PER_REQUEST + 1)
    ]
    with server.client() as client:
        message = _refused(client, 413, files=files)
    assert f"more than {MAX_DOCUMENTS_PER_REQUEST} files" in message


def test_too_many_json_documents_are_refused(server: Server) -> None:
    documents = [{"text": f"Note {uuid.uuid4()}"} for _ in range(MAX_DOCUMENTS_PER_REQUEST + 1)]
    with server.client() as client:
        message = _refused(client, 413, json={"documents": documents})
    assert f"limit is {MAX_DOCUMENTS_PER_REQUEST} per request" in message


def test_a_lone_surrogate_is_bad_input_not_a_server_error(server: Server) -> None:
    body = {"documents": [{"text": f"Valid {uuid.uuid4()}"}, {"text": "broken \ud800 text"}]}
    escaped = json.dumps(body).encode()  # "\ud800" as JSON writes it; not encodable as UTF-8
    with server.client() as client:
        _refused(client, 400, content=escaped, headers={"Content-Type": "application/json"})


def test_a_pdf_that_expands_hugely_is_refused(server: Server) -> None:
    bomb = expanding_pdf(1)  # 4.5 kB holding about a megabyte of text
    files = {"file": ("bomb.pdf", bomb, "application/pdf")}
    with server.client() as client:
        message = _refused(client, 413, files=files)
    assert "bomb.pdf holds more than" in message


def test_health_answers_while_a_slow_pdf_is_read(server: Server) -> None:
    slow = slow_pdf(16)  # no text, and 10-20 s of pypdf's time: far longer than HEALTH_TIMEOUT

    def upload() -> httpx.Response:
        with server.client() as client:
            return client.post("/v1/documents", files={"file": ("slow.pdf", slow, None)})

    with server.client() as client, ThreadPoolExecutor(max_workers=1) as pool:
        before = _total(client)
        reading = pool.submit(upload)
        answered_while_reading = 0
        while not reading.done():
            reply = httpx.get(f"{server.url}/health", timeout=HEALTH_TIMEOUT)
            assert reply.status_code == 200
            answered_while_reading += not reading.done()
            time.sleep(0.2)
        # No text (400), or stopped at RAGBLEND_EXTRACT_TIMEOUT on a slow machine (422).
        assert reading.result().status_code in (400, 422), reading.result().text
        assert answered_while_reading > 0
        assert _total(client) == before


def test_a_small_document_is_stored_while_a_large_batch_is_embedded(server: Server) -> None:
    large = [{"text": _novel(MAX_DOCUMENT_BYTES - 1000)} for _ in range(2)]  # ~90 chunks

    def ingest_large() -> list[dict[str, Any]]:
        with server.client() as client:
            reply = client.post("/v1/documents", json={"documents": large})
            assert reply.status_code == 200, reply.text
            return reply.json()["data"]

    with ThreadPoolExecutor(max_workers=1) as pool, server.client() as client:
        ingesting = pool.submit(ingest_large)
        time.sleep(0.5)  # a head start: the large batch is being chunked and embedded meanwhile
        small = client.post("/v1/documents", json={"documents": [{"text": _novel(300)}]})
        assert small.status_code == 200, small.text
        assert not ingesting.done()  # the small one did not wait for the large batch
        assert client.get(f"/v1/documents/{small.json()['data'][0]['id']}").status_code == 200
        stored = ingesting.result()
        assert [document["created"] for document in stored] == [True] * len(large)
        for document in stored:  # leave no minutes of chunk precompute to the tests after this
            assert client.delete(f"/v1/documents/{document['id']}").status_code == 200
