"""Selection by the question probe (`RAGBLEND_BLEND_METRIC=probe`) through the real engine.

The probe runs the question over the reused chunk KV before any chunk token is computed, then
computes the chosen tokens in every layer; the worker must claim the question (it is blended
too), stream each chunk's first layers twice, and still give full prefill's answer at ratio 1.
"""

from __future__ import annotations

import random
from collections.abc import Iterator

import pytest

from gateway.cli.selfcheck import CAPITALS, capital_document
from tests.integration.capital_questions import answer_text, ask_capital
from tests.integration.conftest import Server, running_server

pytestmark = pytest.mark.integration

DOCUMENTS = {country: capital_document(country, city) for country, city in CAPITALS.items()}


@pytest.fixture(scope="module")
def probe_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    data_dir = tmp_path_factory.mktemp("probe-data")
    with running_server(data_dir, {"RAGBLEND_BLEND_METRIC": "probe"}) as server:
        yield server


def _documents(order: list[str]) -> list[str]:
    return [DOCUMENTS[name] for name in order]


def test_the_probe_reuses_every_chunk_and_recomputes_the_ratio(probe_server: Server) -> None:
    order = list(CAPITALS)
    ask_capital(probe_server, "Italy", _documents(order[::-1]), "blend")  # stores the chunks
    random.Random(5).shuffle(order)
    reply = ask_capital(probe_server, "Italy", _documents(order), "blend", ratio=0.2)
    blend = reply["blend"]
    assert blend["chunks_hit"] == len(order) and blend["chunks_missed"] == 0
    assert blend["reused_tokens"] > 0 and blend["recomputed_tokens"] > 0
    assert "Rome" in answer_text(reply)


def test_the_probe_at_ratio_one_answers_as_full_prefill(probe_server: Server) -> None:
    order = ["Poland", "Germany", "Austria", "France"]
    ask_capital(probe_server, "Poland", _documents(order[::-1]), "blend")
    full = ask_capital(probe_server, "Poland", _documents(order), "full")
    exact = ask_capital(probe_server, "Poland", _documents(order), "blend", ratio=1.0)
    assert answer_text(exact) == answer_text(full)


def test_a_request_may_choose_v_deviation_over_the_servers_probe(probe_server: Server) -> None:
    order = ["Portugal", "France", "Austria"]
    ask_capital(probe_server, "Portugal", _documents(order[::-1]), "blend")
    by_default = ask_capital(probe_server, "Portugal", _documents(order), "blend", ratio=0.2)
    by_v = ask_capital(probe_server, "Portugal", _documents(order), "blend", 0.2, metric="v")
    assert (by_default["blend"]["metric"], by_v["blend"]["metric"]) == ("probe", "v")
    assert by_v["blend"]["chunks_hit"] == len(order) and by_v["blend"]["recomputed_tokens"] > 0
    assert "Lisbon" in answer_text(by_v)
