"""A prompt longer than the engine's step budget (``RAGBLEND_MAX_NUM_BATCHED_TOKENS``, vLLM's
chunked prefill) is prefilled over several steps: a first sighting's chunks, copied out of the
paged cache once the step computing the last of them has run, are stored whole and hit in any
order afterwards, and the answers are those of a server that prefills in one step."""

from __future__ import annotations

import pytest

from gateway.cli.selfcheck import CAPITALS, capital_document
from tests.integration.capital_questions import answer_text, ask_capital, first_sentence
from tests.integration.conftest import Server

pytestmark = pytest.mark.integration

BUDGET = 64
"""Tokens a step: the documents below (about 500 tokens) take eight steps or more."""
DOCUMENTS = {country: capital_document(country, city) for country, city in CAPITALS.items()}
OWN_SERVER = {"RAGBLEND_MAX_NUM_BATCHED_TOKENS": str(BUDGET), "RAGBLEND_LOG_LEVEL": "info"}


def test_vllm_takes_the_budget(own_server: Server) -> None:
    assert f"Chunked prefill is enabled with max_num_batched_tokens={BUDGET}." in (
        own_server.log.read_text()
    )


def test_a_first_sighting_over_several_steps_is_stored_whole(
    own_server: Server, server: Server
) -> None:
    order = ["Poland", "France", "Italy", "Austria", "Germany", "Portugal"]
    documents = [DOCUMENTS[name] for name in order]
    first = ask_capital(own_server, "Italy", documents)
    assert first["blend"]["chunks_missed"] == len(order)
    assert first["usage"]["prompt_tokens"] > 6 * BUDGET
    again = ask_capital(own_server, "Italy", documents[::-1])
    assert again["blend"] | {"chunks_hit": len(order), "chunks_missed": 0} == again["blend"]
    assert again["blend"]["reused_tokens"] > 0
    assert "Rome" in answer_text(again)
    one_step = ask_capital(server, "Italy", documents, "full")
    assert first_sentence(first) == first_sentence(one_step)
