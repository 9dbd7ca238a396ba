"""Blending with the model split across tensor-parallel ranks (issue 14), on a real server.

SmolLM2-135M has 9 query heads and 3 KV heads, so 3 is the smallest split it allows (2 is
refused at start-up); vLLM's CPU backend runs one worker process per rank, which fits on two
cores. Every rank blends its own KV heads and they must agree on every token and chunk choice,
or the layers' collectives would hang: these requests finishing is itself part of the test.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from gateway.cli.selfcheck import (
    CAPITALS,
    EXACT_DIVERGENCE,
    capital_document,
    divergence,
    first_token_distribution,
)
from tests.integration.capital_questions import answer_text, ask_capital, first_sentence
from tests.integration.conftest import Server, wait_until_settled

pytestmark = pytest.mark.integration

RANKS = 3
DOCUMENTS = {country: capital_document(country, city) for country, city in CAPITALS.items()}
ORDERS = [
    ("Italy", ["Portugal", "Italy", "France", "Poland", "Austria", "Germany"]),
    ("Poland", ["Germany", "Austria", "Poland", "Italy", "Portugal", "France"]),
]


OWN_SERVER = {"RAGBLEND_TENSOR_PARALLEL_SIZE": str(RANKS)}


def _ask(
    server: Server, country: str, order: list[str], mode: str, ratio: float | None = None
) -> dict[str, Any]:
    return ask_capital(server, country, [DOCUMENTS[name] for name in order], mode, ratio)


def _rank_dirs(server: Server) -> list[Path]:
    store = server.data_dir / "chunk_kv" / "store"
    return [store / f"tp{RANKS}-rank{rank}" for rank in range(RANKS)]


def _wait_for_entries(server: Server, count: int) -> None:
    """Until every rank's disk tier holds ``count`` entries (they are written in background)."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if all(len(list(d.glob("*.kv"))) >= count for d in _rank_dirs(server)):
            return
        time.sleep(0.2)
    raise AssertionError(f"the ranks never stored {count} entries each")


def test_chunks_miss_once_then_hit_on_every_rank(own_server: Server) -> None:
    country, order = ORDERS[0]
    first = _ask(own_server, country, order, "blend")
    assert first["blend"]["chunks_missed"] == len(CAPITALS)
    _wait_for_entries(own_server, len(CAPITALS))
    # Each rank keeps its own heads' share under keys of its own.
    names = [{path.name for path in d.glob("*.kv")} for d in _rank_dirs(own_server)]
    assert all(not (names[a] & names[b]) for a in range(RANKS) for b in range(a + 1, RANKS))
    repeat = _ask(own_server, *ORDERS[1], "blend")
    assert repeat["blend"]["chunks_hit"] == len(CAPITALS)
    assert repeat["blend"]["chunks_missed"] == 0
    assert repeat["blend"]["reused_tokens"] > 0


@pytest.fixture(scope="module")
def warm(own_server: Server) -> None:
    """Every document's chunk KV is stored once (on every rank)."""
    _ask(own_server, "France", list(CAPITALS), "blend")


def test_ratio_one_reproduces_the_full_prefill(own_server: Server, warm: None) -> None:
    for country, order in ORDERS:
        full = _ask(own_server, country, order, "full")
        blended = _ask(own_server, country, order, "blend", ratio=1.0)
        assert blended["blend"]["chunks_hit"] == len(CAPITALS)
        assert blended["blend"]["reused_tokens"] == 0
        assert first_sentence(blended) == first_sentence(full)
        reference = first_token_distribution(full)
        assert divergence(reference, first_token_distribution(blended)) < EXACT_DIVERGENCE


def test_the_default_blend_answers_from_the_reused_chunks(own_server: Server, warm: None) -> None:
    # A first chunk no earlier prompt began with: a prompt whose head vLLM's prefix cache
    # already holds is left to it, not blended.
    order = ["Italy", "Poland", "Austria", "France", "Portugal", "Germany"]
    reply = _ask(own_server, "Portugal", order, "blend")
    assert reply["blend"]["chunks_hit"] == len(CAPITALS)
    assert reply["blend"]["reused_tokens"] > 0 and reply["blend"]["recomputed_tokens"] > 0
    assert CAPITALS["Portugal"] in answer_text(reply)


def test_a_chunk_missing_on_one_rank_is_recomputed_on_every_rank(
    own_server: Server, warm: None
) -> None:
    wait_until_settled(own_server)  # settling rewrites each entry behind the prefix
    _wait_for_entries(own_server, len(CAPITALS))
    for entry in _rank_dirs(own_server)[1].glob("*.kv"):
        entry.unlink()  # rank 1 lost every chunk; ranks 0 and 2 still hold theirs
    order = ["Poland", "Austria"]  # no earlier prompt began with Poland: no prefix-cache hit
    lopsided = _ask(own_server, "Austria", order, "blend")
    assert lopsided["blend"]["chunks_hit"] == 0
    assert lopsided["blend"]["chunks_missed"] == 2
    full = _ask(own_server, "Austria", order, "full")
    assert first_sentence(lopsided) == first_sentence(full)
    again = _ask(own_server, "Poland", order[::-1], "blend")  # nor with Austria
    assert again["blend"]["chunks_hit"] == 2
