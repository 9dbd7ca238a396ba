"""Selection by the question probe (`blend.metric: probe`) through the real engine.

The probe runs the question over the reused chunk KV before any chunk token is computed, then
computes the chosen tokens in every layer; the worker must claim the question (it is blended
too), stream each chunk's first layers twice, and still give full prefill's answer at ratio 1.
Asked per request on the session's server, whose own metric for sent documents is `v`
(`RAGBLEND_BLEND_METRIC`): what a request asks for is what it gets, either way.
"""

from __future__ import annotations

import random

import pytest

from gateway.cli.selfcheck import CAPITALS, capital_document
from tests.integration.capital_questions import answer_text, ask_capital, first_sentence
from tests.integration.conftest import Server

pytestmark = pytest.mark.integration

DOCUMENTS = {country: capital_document(country, city) for country, city in CAPITALS.items()}


def _documents(order: list[str]) -> list[str]:
    return [DOCUMENTS[name] for name in order]


def test_the_probe_reuses_every_chunk_and_recomputes_the_ratio(server: Server) -> None:
    order = list(CAPITALS)
    ask_capital(server, "Italy", _documents(order[::-1]), "blend")  # stores the chunks
    random.Random(5).shuffle(order)
    reply = ask_capital(server, "Italy", _documents(order), "blend", ratio=0.2, metric="probe")
    blend = reply["blend"]
    assert blend["metric"] == "probe"
    assert blend["chunks_hit"] == len(order) and blend["chunks_missed"] == 0
    assert blend["reused_tokens"] > 0 and blend["recomputed_tokens"] > 0
    assert "Rome" in answer_text(reply)


def test_the_probe_at_ratio_one_answers_as_full_prefill(server: Server) -> None:
    order = ["Poland", "Germany", "Austria", "France"]
    ask_capital(server, "Poland", _documents(order[::-1]), "blend")
    full = ask_capital(server, "Poland", _documents(order), "full")
    exact = ask_capital(server, "Poland", _documents(order), "blend", ratio=1.0, metric="probe")
    assert first_sentence(exact) == first_sentence(full)


def test_a_request_may_choose_v_deviation_over_the_servers_probe(server: Server) -> None:
    order = ["Portugal", "France", "Austria"]
    ask_capital(server, "Portugal", _documents(order[::-1]), "blend")
    by_v = ask_capital(server, "Portugal", _documents(order), "blend", ratio=0.2, metric="v")
    by_probe = ask_capital(server, "Portugal", _documents(order), "blend", ratio=0.2)
    assert (by_v["blend"]["metric"], by_probe["blend"]["metric"]) == ("v", "probe")
    assert by_probe["blend"]["chunks_hit"] == len(order)
    assert by_probe["blend"]["recomputed_tokens"] > 0
    assert "Lisbon" in answer_text(by_probe)
