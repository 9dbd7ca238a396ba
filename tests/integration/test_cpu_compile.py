"""`RAGBLEND_CPU_COMPILE`: the model compiled on CPU (vLLM's own default there) still blends,
and recomputing every token still gives the full prefill's answer."""

from __future__ import annotations

import platform
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from gateway.cli.selfcheck import CAPITALS, capital_document, divergence, first_token_distribution
from tests.integration.capital_questions import ask_capital, first_sentence
from tests.integration.conftest import Server, running_server

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def compiled(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    settings = {"RAGBLEND_CPU_COMPILE": "true"}
    with running_server(tmp_path_factory.mktemp("compiled"), settings) as server:
        yield server


def cpu_model() -> str:
    names = re.findall(r"^model name\s*:\s*(.+)$", Path("/proc/cpuinfo").read_text(), re.M)
    return names[0] if names else platform.processor()


def test_a_compiled_model_blends_and_ratio_one_matches_its_full_prefill(compiled: Server) -> None:
    documents = [capital_document(country, city) for country, city in CAPITALS.items()]
    ask_capital(compiled, "Italy", documents, "blend")  # stores every chunk
    order = documents[::-1]
    full = ask_capital(compiled, "Italy", order, "full")
    # vLLM's own forward, nothing of the blend in it: it answered garbage while the connector's
    # start-up check converted the model's rotary table in place under the compiled graph.
    assert "Rome" in first_sentence(full), f"on {cpu_model()}: {first_sentence(full)!r}"
    blended = ask_capital(compiled, "Italy", order, "blend", ratio=1.0)
    assert blended["blend"]["chunks_hit"] == len(CAPITALS)
    assert first_sentence(blended) == first_sentence(full)
    assert divergence(first_token_distribution(full), first_token_distribution(blended)) < 0.05
