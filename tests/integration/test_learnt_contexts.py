"""Contexts learnt from traffic on the real server (SmolLM2, `RAGBLEND_LEARN_CONTEXTS=true`):
documents sent for the first time are learnt on the spot; cached ones sent together again and
again are precomputed behind each other in the background; from then on the same documents in
the same order are reused exactly (or take the in-context recipe behind another head)."""

from __future__ import annotations

import re
import time
from typing import Any

import httpx
import pytest

from tests.integration.conftest import Server

pytestmark = pytest.mark.integration

WAIT_SECONDS = 300
FILLER = "Its people farm the valleys, trade by river and hold a market every spring. "


OWN_SERVER = {"RAGBLEND_LEARN_CONTEXTS": "true", "RAGBLEND_LEARN_CONTEXTS_AFTER": "2"}


def _documents(*places: str) -> list[str]:
    return [f"The capital of {place} is {place}ville. " + FILLER * 3 for place in places]


def _work(server: Server, outcome: str) -> float:
    text = httpx.get(f"{server.url}/metrics").text
    pattern = rf'^ragblend_learnt_context_work_total{{outcome="{outcome}"}} (\S+)$'
    match = re.search(pattern, text, re.M)
    return float(match.group(1)) if match else 0.0


def _reply(
    client: httpx.Client,
    server: Server,
    documents: list[str],
    blend: dict[str, Any] | None = None,
    system: str | None = None,
) -> dict[str, Any]:
    head = [] if system is None else [{"role": "system", "content": system}]
    body = {
        "model": server.model,
        "messages": [*head, {"role": "user", "content": "Name one capital from the documents."}],
        "documents": documents,
        "max_tokens": 16,
        "temperature": 0,
        **({"blend": blend} if blend else {}),
    }
    reply = client.post("/v1/chat/completions", json=body)
    assert reply.status_code == 200, reply.text
    return reply.json()


def _ask(
    client: httpx.Client, server: Server, documents: list[str], system: str | None = None
) -> dict[str, Any]:
    return _reply(client, server, documents, system=system)["blend"]


def _answer(reply: dict[str, Any]) -> str:
    return reply["choices"][0]["message"]["content"]


def _until_learnt(server: Server, done_before: float) -> None:
    deadline = time.monotonic() + WAIT_SECONDS
    while _work(server, "done") <= done_before:
        assert _work(server, "failed") == 0, "learning a context failed: see the server log"
        assert time.monotonic() < deadline, "the documents' context was never learnt"
        time.sleep(0.2)


def _learn(client: httpx.Client, server: Server, documents: list[str]) -> list[dict[str, Any]]:
    """Cache ``documents`` in reverse order (learnt on the spot in that order), then send them
    twice as they are (the second sighting queues them) and wait until they are learnt."""
    _ask(client, server, documents[::-1])
    queued, done = _work(server, "queued"), _work(server, "done")
    summaries = [_ask(client, server, documents) for _ in range(2)]
    assert _work(server, "queued") == queued + 1
    _until_learnt(server, done)
    return summaries


def test_documents_sent_for_the_first_time_are_learnt_on_the_spot(own_server: Server) -> None:
    documents = _documents("Freedonia", "Sylvania", "Grand Fenwick")
    with own_server.client() as client:
        queued = _work(own_server, "queued")
        first, second = _ask(client, own_server, documents), _ask(client, own_server, documents)
        other_head = _ask(client, own_server, documents, system="Answer in one word.")
    # The first request computed every chunk in place, as a prefill, and stored them as such.
    assert first["context"] == "cold" and first["chunks_missed"] == 3
    # Behind the head they were learnt behind, the chunks' KV is exact: nothing recomputed.
    assert second["context"] == "exact" and second["mode"] == "reuse"
    assert second["chunks_hit"] == 3 and second["chunks_missed"] == 0
    assert second["reused_tokens"] > 0
    # Behind another head (a system prompt), the in-context recipe.
    assert other_head["context"] == "learnt" and other_head["metric"] == "probe"
    assert other_head["chunks_hit"] == 3
    assert _work(own_server, "queued") == queued  # nothing left for the background worker


def test_cached_documents_sent_again_and_again_are_learnt_behind_each_other(
    own_server: Server,
) -> None:
    documents = _documents("Laputa", "Lilliput", "Brobdingnag")
    with own_server.client() as client:
        first, second = _learn(client, own_server, documents)
        third = _ask(client, own_server, documents)
        reordered = _ask(client, own_server, [documents[1], documents[0], documents[2]])
        joined = _ask(client, own_server, [*documents, *_documents("Balnibarbi")])
    assert first["context"] == second["context"] == "cold"
    assert first["metric"] == "probe" and first["chunks_hit"] == 3
    assert third["context"] == "exact" and third["mode"] == "reuse"
    # The same documents with other companions, or in another order, stay cold.
    assert reordered["context"] == joined["context"] == "cold"
    assert reordered["metric"] == joined["metric"] == "probe"


def test_exact_chunks_reused_alone_answer_as_full_prefill(own_server: Server) -> None:
    """Learnt on the spot by the first request, which missed them all, the stored KV is what a
    full prefill of such a prompt computes: reused with nothing recomputed, it gives full
    prefill's answer (tests/integration/test_contextual_precompute.py measures how close a
    learning request's KV is, against cold KV)."""
    documents = _documents("Florin", "Guilder", "Gilead")
    with own_server.client() as client:
        assert _ask(client, own_server, documents)["chunks_missed"] == 3
        exact = _reply(client, own_server, documents)
        full = _reply(client, own_server, documents, {"mode": "full"})
        asked = _reply(client, own_server, documents, {"recompute_ratio": 0.3})["blend"]
    # A request that chooses its recipe gets it, here the in-context one at its own ratio.
    assert asked["mode"] == "blend" and asked["metric"] == "probe"
    assert exact["blend"]["context"] == "exact" and exact["blend"]["mode"] == "reuse"
    summary = exact["blend"]
    assert summary["chunks_hit"] == 3
    assert summary["recomputed_tokens"] < summary["reused_tokens"] / 2
    assert _answer(exact) == _answer(full)


def test_the_server_answers_while_it_learns(own_server: Server) -> None:
    documents = _documents("Ruritania", "Genovia", "Kreplachistan", "Elbonia")
    with own_server.client() as client:
        _ask(client, own_server, documents[::-1])
        queued, done = _work(own_server, "queued"), _work(own_server, "done")
        _ask(client, own_server, documents)
        _ask(client, own_server, documents)
        assert _work(own_server, "queued") == queued + 1
        # Learning waits for live requests; these are answered whatever it is doing.
        for place in ("Molvania", "Vulgaria"):
            assert _ask(client, own_server, _documents(place, "Zenda"))["context"] == "cold"
            assert httpx.get(f"{own_server.url}/health").status_code == 200
        _until_learnt(own_server, done)
        assert _ask(client, own_server, documents)["context"] == "exact"


def test_without_learning_documents_stay_cold(server: Server) -> None:
    documents = _documents("Atlantis", "Lemuria", "Mu")
    with server.client() as client:
        contexts = [_ask(client, server, documents)["context"] for _ in range(3)]
    assert contexts == ["cold"] * 3
    assert _work(server, "queued") == _work(server, "done") == 0
