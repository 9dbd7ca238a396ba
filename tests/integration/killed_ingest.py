"""A server killed (SIGKILL) in the middle of a long ingest, and what its next life must hold
(`test_server_lives.py`): every document it acknowledged, searchable, each batch whole or not
at all."""

from __future__ import annotations

import os
import signal
import threading
import time

import httpx

from tests.integration.conftest import Server, engine_core_pids

BATCH = 40
"""Documents per request: about 80 chunks, several seconds of embedding."""
BATCHES = 30
TOPICS = (
    "river mountain harbour winter market garden bridge lantern orchard meadow quarry village "
    "station library compass thunder island valley engine signal candle"
)
WORDS = TOPICS.split()


def _passage(batch: int, number: int) -> str:
    """About 400 words, distinct for every document."""
    words = [WORDS[(batch * 7 + number * 3 + at) % len(WORDS)] for at in range(390)]
    sentences = [" ".join(words[at : at + 13]).capitalize() + "." for at in range(0, 390, 13)]
    return f"Record {batch}-{number} opens here.\n\n" + " ".join(sentences)


def _ingest_until_killed(server: Server, acknowledged: list[list[str]]) -> None:
    """Send batches one after another; record each batch acknowledged (2xx)."""
    with server.client() as client:
        for batch in range(BATCHES):
            ids = [f"kill-{batch}-{number}" for number in range(BATCH)]
            documents = [
                {"id": doc_id, "text": _passage(batch, number)} for number, doc_id in enumerate(ids)
            ]
            try:
                reply = client.post("/v1/documents", json={"documents": documents})
            except httpx.TransportError:
                return
            assert reply.status_code == 200, reply.text
            acknowledged.append(ids)


def _kill(server: Server) -> None:
    """SIGKILL the server, then the engine it started (which would outlive it)."""
    assert server.process is not None
    cores = engine_core_pids(server.process.pid)
    os.kill(server.process.pid, signal.SIGKILL)
    for core in cores:
        os.kill(core, signal.SIGKILL)
    server.process.wait(timeout=60)


def kill_mid_ingest(server: Server) -> list[list[str]]:
    """Batches of documents sent to `server` until it is SIGKILLed just after acknowledging the
    third; returns the ids of the batches it acknowledged."""
    acknowledged: list[list[str]] = []
    sender = threading.Thread(target=_ingest_until_killed, args=(server, acknowledged))
    sender.start()
    deadline = time.monotonic() + 600
    while len(acknowledged) < 3 and sender.is_alive():
        assert time.monotonic() < deadline, "three batches were not ingested in 10 minutes"
        time.sleep(0.05)
    # At once: the next batch is in flight, and the index file (written every few seconds) most
    # likely lacks the last acknowledged one, which the restart repairs.
    _kill(server)
    sender.join(timeout=120)
    assert 3 <= len(acknowledged) < BATCHES, "the kill did not land mid-ingest"
    return acknowledged


def check_kept(client: httpx.Client, model: str, acknowledged: list[list[str]]) -> None:
    """The restarted server behind `client` holds every acknowledged batch and no partial one,
    and answers over the last acknowledged document."""
    listed = client.get("/v1/documents", params={"limit": 200}).json()
    stored: set[str] = set()
    for offset in range(0, listed["total"], 200):
        page = client.get("/v1/documents", params={"offset": offset, "limit": 200}).json()
        stored |= {document["id"] for document in page["data"]}
    for batch in range(BATCHES):
        ids = {f"kill-{batch}-{number}" for number in range(BATCH)}
        assert ids <= stored or not ids & stored, f"batch {batch} was stored in part"
    for ids in acknowledged:
        assert set(ids) <= stored
        for doc_id in (ids[0], ids[-1]):
            document = client.get(f"/v1/documents/{doc_id}").json()
            assert document["status"] in ("indexed", "cached")
            assert document["num_chunks"] >= 1
    last = acknowledged[-1][-1]
    body = {
        "model": model,
        "messages": [{"role": "user", "content": "Which record opens here?"}],
        "retrieval": {"top_k": 1, "document_ids": [last]},
        "max_tokens": 1,
    }
    reply = client.post("/v1/chat/completions", json=body)
    assert reply.status_code == 200, reply.text
    assert [source["document_id"] for source in reply.json()["retrieval"]] == [last]
