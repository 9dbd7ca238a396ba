"""Blended prefill through the real engine: reuse anywhere, misses, corruption, concurrency."""

from __future__ import annotations

import random
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from gateway.cli.selfcheck import (
    CAPITALS,
    EXACT_DIVERGENCE,
    capital_document,
    capital_request,
    divergence,
    first_token_distribution,
)
from tests.integration.capital_questions import answer_text, ask_capital, first_sentence
from tests.integration.conftest import Server, settled_count, wait_until_settled

pytestmark = pytest.mark.integration

DOCUMENTS = {country: capital_document(country, city) for country, city in CAPITALS.items()}


def _ask(
    server: Server, country: str, order: list[str], mode: str, ratio: float | None = None
) -> dict[str, Any]:
    return ask_capital(server, country, [DOCUMENTS[name] for name in order], mode, ratio)


def _orders(seed: int) -> list[tuple[str, list[str]]]:
    shuffled = []
    for index, country in enumerate(CAPITALS):
        order = list(CAPITALS)
        random.Random(seed + index).shuffle(order)
        shuffled.append((country, order))
    return shuffled


@pytest.fixture(scope="module")
def warm(server: Server) -> None:
    """Every document's chunk KV is stored once."""
    _ask(server, "France", list(CAPITALS), "blend")


def test_documents_report_usage_and_blend_counts(server: Server) -> None:
    order = ["Poland", "Austria"]
    first = _ask(server, "Poland", order, "blend")
    again = _ask(server, "Poland", list(reversed(order)), "blend")
    assert first["blend"]["chunks_missed"] + first["blend"]["chunks_hit"] == 2
    assert again["blend"] == again["blend"] | {"mode": "blend", "chunks_hit": 2, "chunks_missed": 0}
    cached = again["usage"]["prompt_tokens_details"]["cached_tokens"]
    assert cached == again["blend"]["reused_tokens"] + again["blend"]["prefix_cached_tokens"]
    assert again["blend"]["reused_tokens"] > 0


def test_an_answer_ended_by_a_stop_string_still_reports_its_blend(server: Server) -> None:
    whole = answer_text(_ask(server, "Portugal", ["Portugal", "Germany"], "blend"))
    assert " " in whole.strip()  # a stop string of one space cuts such an answer short
    documents = [DOCUMENTS["Germany"], DOCUMENTS["Portugal"]]  # new order: no prefix-cache hit
    body = capital_request("Portugal", documents, server.model, {"mode": "blend"})
    with server.client() as client:
        reply = client.post("/v1/chat/completions", json=body | {"stop": [" "]})
    assert reply.status_code == 200, reply.text
    cut = reply.json()
    assert cut["choices"][0]["finish_reason"] == "stop"
    assert " " not in answer_text(cut).strip()
    assert cut["blend"]["chunks_hit"] == 2
    assert cut["usage"]["prompt_tokens_details"]["cached_tokens"] > 0


def test_a_repeated_prompt_counts_each_cached_token_once(server: Server) -> None:
    order = list(CAPITALS)
    _ask(server, "Italy", order, "blend")
    repeat = _ask(server, "Italy", order, "blend")
    usage, blend = repeat["usage"], repeat["blend"]
    assert blend["prefix_cached_tokens"] > 0  # vLLM's prefix cache serves the repeat's start
    assert usage["prompt_tokens_details"]["cached_tokens"] <= usage["prompt_tokens"]
    counted = blend["prefix_cached_tokens"] + blend["reused_tokens"] + blend["recomputed_tokens"]
    assert counted <= usage["prompt_tokens"]


def test_reordered_chunks_all_hit(server: Server, warm: None) -> None:
    for country, order in _orders(seed=10)[:3]:
        reply = _ask(server, country, order, "blend")
        assert reply["blend"]["chunks_hit"] == len(CAPITALS)
        assert reply["blend"]["chunks_missed"] == 0


def test_ratio_one_reproduces_the_full_prefill(server: Server, warm: None) -> None:
    for country, order in _orders(seed=20)[:4]:
        full = _ask(server, country, order, "full")
        blended = _ask(server, country, order, "blend", ratio=1.0)
        assert blended["blend"]["chunks_hit"] == len(CAPITALS)
        assert blended["blend"]["reused_tokens"] == 0
        assert first_sentence(blended) == first_sentence(full)
        reference = first_token_distribution(full)
        assert divergence(reference, first_token_distribution(blended)) < 0.05


def test_selective_recompute_stays_much_closer_to_full_than_reuse(
    server: Server, warm: None
) -> None:
    by_mode: dict[str, list[float]] = {"blend": [], "reuse": []}
    for country, order in _orders(seed=30):
        reference = first_token_distribution(_ask(server, country, order, "full"))
        for mode, values in by_mode.items():
            reply = _ask(server, country, order, mode, ratio=0.15 if mode == "blend" else None)
            values.append(divergence(reference, first_token_distribution(reply)))
    blend, reuse = (sum(values) / len(values) for values in by_mode.values())
    assert blend < 0.5 * reuse


def test_a_missing_middle_chunk_leaves_the_others_hitting(server: Server) -> None:
    """The miss behind a reused chunk is stored as the blend computed it (hit at once by the
    next request) and queued to settle behind the prefix, not computed twice on the way."""
    _ask(server, "Germany", ["France", "Germany"], "blend")
    novel = capital_document("Freedonia", "Fredville")
    body_order = ["France", "Freedonia", "Germany"]
    DOCUMENTS["Freedonia"] = novel
    queued = settled_count(server, "queued")
    try:
        first = _ask(server, "Germany", body_order, "blend")
        settling = settled_count(server, "queued") - queued
        second = _ask(server, "Germany", body_order[::-1], "blend")
    finally:
        del DOCUMENTS["Freedonia"]
    assert first["blend"]["chunks_hit"] == 2
    assert first["blend"]["chunks_missed"] == 1
    assert settling == 1
    assert second["blend"]["chunks_hit"] == 3
    assert "Berlin" in answer_text(first)


def test_a_first_sighting_is_one_prefill_and_its_chunks_settle_behind_the_prefix_later(
    server: Server,
) -> None:
    """A request that misses every chunk stores each as its own prefill computed it, and the
    server recomputes them behind the fixed prefix once idle: then reusing them with nothing
    recomputed no longer gives exactly the full prefill's answer (the in-context KV would).
    Whichever layout vLLM's CPU kernels give the paged cache (AMX packs it), vLLM's own
    prefill computes the first sighting and its chunks are copied out of the cache: the worker
    warns where it cannot."""
    assert "first sightings are computed by the blend" not in server.log.read_text()
    novel = {"Ruritania": "Strelsau", "Genovia": "Pyrus", "Latveria": "Doomstadt"}
    documents = [capital_document(country, city) for country, city in novel.items()]
    queued = settled_count(server, "queued")
    first = ask_capital(server, "Genovia", documents, "blend")
    assert first["blend"]["chunks_missed"] == len(novel)
    assert settled_count(server, "queued") == queued + len(novel)
    wait_until_settled(server)
    reused = ask_capital(server, "Genovia", documents, "reuse")
    full = ask_capital(server, "Genovia", documents, "full")
    assert reused["blend"] == reused["blend"] | {"chunks_hit": len(novel), "chunks_missed": 0}
    assert settled_count(server, "queued") == queued + len(novel)  # hits are not settled again
    reference = first_token_distribution(full)
    assert divergence(reference, first_token_distribution(first)) < EXACT_DIVERGENCE  # one prefill
    assert divergence(reference, first_token_distribution(reused)) > 0.05  # 0.31; exact: 0.00


def _store_files(server: Server) -> set[Path]:
    return set((server.data_dir / "chunk_kv" / "store").glob("*.kv"))


def _wait_for_new_file(server: Server, before: set[Path]) -> Path:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        new = _store_files(server) - before
        if new:
            return new.pop()
        time.sleep(0.1)
    raise AssertionError("the chunk was never written to the disk tier")


def test_a_corrupted_disk_entry_is_a_miss_with_the_same_answer(server: Server) -> None:
    _ask(server, "Austria", ["Austria"], "blend")
    DOCUMENTS["Atlantis"] = capital_document("Atlantis", "Poseidonia")
    order = ["Austria", "Atlantis"]
    try:
        before = _store_files(server)
        missed = _ask(server, "Austria", order, "reuse")
        entry = _wait_for_new_file(server, before)
        data = bytearray(entry.read_bytes())
        data[len(data) // 2] ^= 0xFF
        entry.write_bytes(bytes(data))
        corrupted = _ask(server, "Austria", order, "reuse")
        healed = _ask(server, "Austria", order, "reuse")
    finally:
        del DOCUMENTS["Atlantis"]
    assert missed["blend"]["chunks_missed"] == 1
    assert corrupted["blend"]["chunks_missed"] == 1
    assert answer_text(corrupted) == answer_text(missed)
    assert healed["blend"]["chunks_hit"] == 2


def test_eight_simultaneous_blended_requests_are_all_answered_right(
    server: Server, warm: None
) -> None:
    # Ratio 1.0 recomputes everything, so under concurrency each prefill must give the full
    # prefill's first-token distribution. Later tokens are decoded in a batch of 8 whose bf16
    # sums differ from a lone request's: SmolLM2 parts on a near-tie at the second token of
    # one of these prompts ("The capital of Portugal..." / "The answer is:") now and then.
    jobs = (_orders(seed=40) + _orders(seed=50))[:8]
    with ThreadPoolExecutor(max_workers=8) as pool:
        replies = list(pool.map(lambda job: _ask(server, *job, "blend", ratio=1.0), jobs))
    for (country, order), reply in zip(jobs, replies, strict=True):
        reference = first_token_distribution(_ask(server, country, order, "full"))
        assert divergence(reference, first_token_distribution(reply)) < EXACT_DIVERGENCE
        assert reply["blend"]["chunks_hit"] == len(CAPITALS)


def test_selfcheck_passes_on_the_served_model(server: Server) -> None:
    command = [sys.executable, "-m", "gateway.cli.main", "selfcheck", "--url", server.url]
    command += ["--api-key", server.api_key, "--prompts", "2"]
    result = subprocess.run(command, capture_output=True, text=True, timeout=600, check=False)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "blend@1.0" in result.stdout and "reuse" in result.stdout
    assert "library@default" in result.stdout and "skipped" not in result.stdout
    with server.client() as client:  # its documents are gone again
        assert client.get("/v1/documents/ragblend-selfcheck-france").status_code == 404
