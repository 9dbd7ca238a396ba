"""``ragblend selfcheck`` over the server's library: the recipe of retrieved chunks.

Library chunks are precomputed behind their neighbours and blended with their own recipe
(``RAGBLEND_BLEND_IN_CONTEXT_RATIO`` and ``_METRIC``), not sent documents' one. To check that
recipe the selfcheck ingests its capital documents under its own ids, waits until their chunks
are precomputed, asks with retrieval restricted to them, and deletes them at the end, also when
it fails. A server without a library (or refusing the ingest) skips this part.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import httpx

ID_PREFIX = "ragblend-selfcheck-"
PRECOMPUTE_SECONDS = 600.0


def document_id(country: str) -> str:
    return ID_PREFIX + country.lower()


@contextmanager
def selfcheck_documents(client: httpx.Client, documents: dict[str, str]) -> Iterator[str | None]:
    """Ingest ``documents`` (country -> text) and wait until they are cached; yields None when
    they are usable, else why the library part is skipped. Deletes them on the way out."""
    body = {"documents": [{"id": document_id(c), "text": t} for c, t in documents.items()]}
    reply = client.post("/v1/documents", json=body)
    if reply.status_code != 200:
        yield f"the server refused the ingest ({reply.status_code}: {reply.text[:200]})"
        return
    try:
        yield _wait_until_cached(client, [document_id(country) for country in documents])
    finally:
        for country in documents:
            client.delete(f"/v1/documents/{document_id(country)}")


def _wait_until_cached(client: httpx.Client, ids: list[str]) -> str | None:
    deadline = time.monotonic() + PRECOMPUTE_SECONDS
    while True:
        statuses = [client.get(f"/v1/documents/{doc}").json().get("status") for doc in ids]
        if all(status == "cached" for status in statuses):
            return None
        if "failed" in statuses:
            return "precomputing a selfcheck document failed"
        if time.monotonic() > deadline:
            return f"the selfcheck documents were not cached within {PRECOMPUTE_SECONDS:.0f} s"
        time.sleep(0.5)


def library_request(request: dict[str, Any], countries: list[str]) -> dict[str, Any]:
    """``request`` (a selfcheck chat request) retrieving from the selfcheck documents instead of
    sending them."""
    ids = [document_id(country) for country in countries]
    body = {key: value for key, value in request.items() if key != "documents"}
    return {**body, "retrieval": {"top_k": len(ids), "document_ids": ids}}
