"""Faults that used to take the service down: tampered chunk-KV files, a second server on the
same data dir, and the engine process dying under a running server."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
import torch

from engine.kvstore.entry import ChunkKV
from engine.kvstore.mac import EntryMac
from engine.kvstore.secret import load_or_create_secret
from engine.platform import resolve_dtype
from gateway.cli.selfcheck import FILLER, capital_document
from tests.integration.conftest import (
    REPO,
    TEST_MODEL,
    Server,
    engine_core_pids,
    wait_until_settled,
)

pytestmark = pytest.mark.integration


def _ask(server: Server, documents: list[str], question: str) -> dict[str, Any]:
    body = {
        "model": server.model,
        "messages": [{"role": "user", "content": question}],
        "documents": documents,
        "max_tokens": 12,
        "temperature": 0,
        "blend": {"mode": "reuse"},
    }
    with server.client() as client:
        reply = client.post("/v1/chat/completions", json=body)
    assert reply.status_code == 200, reply.text
    return reply.json()


def _stored_entry(server: Server, documents: list[str], question: str) -> tuple[Path, dict]:
    """Ask once so the chunk is computed; returns its disk-tier file and the miss's reply."""
    store = server.data_dir / "chunk_kv" / "store"
    before = set(store.glob("*.kv"))
    reply = _ask(server, documents, question)
    wait_until_settled(server)  # the entry as later requests find it, behind the prefix
    deadline = time.monotonic() + 30
    while not (new := set(store.glob("*.kv")) - before):
        assert time.monotonic() < deadline, "the chunk never reached the disk tier"
        time.sleep(0.1)
    return new.pop(), reply


def _forge(path: Path, secret: bytes, signer: bytes, tamper: Any) -> None:
    """Rewrite ``path`` (signed with ``secret``) as a well-formed entry altered by ``tamper`` and
    signed with ``signer``."""
    key = path.stem
    entry = ChunkKV.from_bytes(path.read_bytes(), EntryMac(secret, key))
    path.write_bytes(tamper(entry).to_bytes(EntryMac(signer, key)))


def _fewer_tokens(entry: ChunkKV) -> ChunkKV:
    return ChunkKV(entry.keys[:, :-3].clone(), entry.values[:, :-3].clone(), entry.token_ids[:-3])


def _zeroed(entry: ChunkKV) -> ChunkKV:
    return ChunkKV(torch.zeros_like(entry.keys), torch.zeros_like(entry.values), entry.token_ids)


@pytest.mark.parametrize(
    ("name", "tamper", "foreign_secret"),
    [("Lemuria", _fewer_tokens, False), ("Mu", _zeroed, True), ("Thule", _zeroed, False)],
)
def test_a_tampered_entry_is_a_miss_with_the_right_answer(
    server: Server, name: str, tamper: Any, foreign_secret: bool
) -> None:
    documents = [capital_document(name, f"{name}ville")]
    question = f"What is the capital of {name}?"
    path, missed = _stored_entry(server, documents, question)
    secret = load_or_create_secret(path.parents[1] / "secret")
    _forge(path, secret, os.urandom(32) if foreign_secret else secret, tamper)
    tampered = _ask(server, documents, question)
    if tamper is _zeroed and not foreign_secret:
        # Signed with this server's own secret and the right shape: only this server could have
        # written it, so it is served; the point is that nothing breaks.
        assert tampered["blend"]["chunks_hit"] == 1
    else:
        assert tampered["blend"]["chunks_missed"] == 1
        assert tampered["blend"]["rejected_chunks"] == 1
        assert tampered["choices"][0]["message"] == missed["choices"][0]["message"]
    with server.client() as client:
        assert client.get("/health").status_code == 200
    assert _ask(server, documents, question)["blend"]["chunks_hit"] == 1


def test_a_second_server_on_the_same_data_dir_is_refused_and_the_first_keeps_serving(
    server: Server,
) -> None:
    env = {**os.environ, "RAGBLEND_MODEL": TEST_MODEL, "RAGBLEND_DATA_DIR": str(server.data_dir)}
    command = [sys.executable, "-m", "gateway.cli.main", "serve", "--port", "1"]
    second = subprocess.run(
        command, cwd=REPO, env=env, capture_output=True, text=True, timeout=120, check=False
    )
    assert second.returncode != 0
    assert "in use by another ragblend server (pid" in second.stderr
    reply = _ask(server, [capital_document("Norway", "Oslo")], "What is the capital of Norway?")
    assert reply["blend"]["chunks_hit"] + reply["blend"]["chunks_missed"] == 1


KV_ELEMENT_BYTES = 4 if resolve_dtype("auto", "cpu") == "float32" else 2
ENTRY_BYTES_BUDGET = 3_400_000 * KV_ELEMENT_BYTES
"""Disk tier of the own server, which stores raw KV: two of the documents below and not three
(117 tokens, 1.35 MB of SmolLM2 KV per byte of element each: 2.7 MB in bf16, 5.4 MB in float32,
the dtype `auto` takes on a CPU without bf16)."""


OWN_SERVER = {
    "RAGBLEND_CHUNK_CACHE_DISK_GIB": str(ENTRY_BYTES_BUDGET / (1 << 30)),
    "RAGBLEND_CHUNK_CACHE_FORMAT": "raw",  # sizes known in advance
    # Behind the fixed prefix: a neighbour context's refreshes would store entries again and
    # change which document's KV the store evicts first.
    "RAGBLEND_CHUNK_CONTEXT": "passages",
}
"""A server of this module's own, with a chunk store that holds two documents' KV."""


def _fact(place: str, city: str) -> str:
    return f"The capital of {place} is {city}.\n\n" + FILLER * 6


def _status(client: httpx.Client, document_id: str) -> str:
    return client.get(f"/v1/documents/{document_id}").json()["status"]


def _wait_for_status(client: httpx.Client, document_id: str, status: str) -> None:
    deadline = time.monotonic() + 120
    while (found := _status(client, document_id)) != status:
        assert time.monotonic() < deadline, f"{document_id} stayed {found}, never {status}"
        time.sleep(0.2)


def _ask_library(client: httpx.Client, server: Server, question: str) -> dict[str, Any]:
    body = {
        "model": server.model,
        "messages": [{"role": "user", "content": question}],
        "retrieval": {"top_k": 1},
        "max_tokens": 4,
        "temperature": 0,
    }
    reply = client.post("/v1/chat/completions", json=body)
    assert reply.status_code == 200, reply.text
    return reply.json()


def test_a_document_whose_chunk_kv_was_evicted_is_no_longer_cached(own_server: Server) -> None:
    places = [("Avalon", "Glastonbury"), ("Brigadoon", "Heather"), ("Camelot", "Caerleon")]
    with own_server.client() as client:
        for place, city in places:
            document = {"id": place.lower(), "text": _fact(place, city)}
            assert client.post("/v1/documents", json={"documents": [document]}).is_success
            _wait_for_status(client, place.lower(), "cached")
        # Camelot's KV pushed Avalon's out of the disk tier as the tier's writer stored it, after
        # the precompute that computed it had reported: the worker reports the loss by itself.
        _wait_for_status(client, "avalon", "indexed")
        assert _status(client, "camelot") == "cached"
        reply = _ask_library(client, own_server, "What is the capital of Camelot?")
        assert reply["blend"]["chunks_hit"] == 1
        # A question that needs Avalon computes and stores its chunk again.
        reply = _ask_library(client, own_server, "What is the capital of Avalon?")
        assert reply["retrieval"][0]["document_id"] == "avalon"
        assert reply["blend"]["chunks_missed"] == 1
        _wait_for_status(client, "avalon", "cached")


def test_a_killed_engine_makes_the_server_exit_non_zero(own_server: Server) -> None:
    """Runs last: it ends the module's own server."""
    own = own_server
    assert own.process is not None
    cores = engine_core_pids(own.process.pid)
    assert cores, "no engine core process found"
    for core in cores:
        os.kill(core, signal.SIGKILL)
    try:
        code = own.process.wait(timeout=120)
    except subprocess.TimeoutExpired:
        pytest.fail("the server kept running with a dead engine")
    assert code != 0
    assert "the engine has stopped" in own.log.read_text()
    with pytest.raises(httpx.TransportError):
        httpx.get(f"{own.url}/health", timeout=2)
