"""`RAGBLEND_CPU_COMPILE`: the model compiled on CPU (vLLM's own default there) still blends,
recomputing every token still gives the full prefill's answer, and a restart on the same data
directory loads the compiled code instead of compiling again."""

from __future__ import annotations

import platform
import re
import signal
from pathlib import Path

import pytest

from gateway.cli.selfcheck import CAPITALS, capital_document, divergence, first_token_distribution
from tests.integration.capital_questions import ask_capital, first_sentence
from tests.integration.conftest import Server, running_server

pytestmark = pytest.mark.integration


OWN_SERVER = {"RAGBLEND_CPU_COMPILE": "true"}


def compiled_code(data_dir: Path) -> dict[Path, int]:
    """Inductor's files kept under the data directory, with their modification times."""
    cache = data_dir / "vllm" / "inductor"
    return {path: path.stat().st_mtime_ns for path in cache.rglob("*") if path.is_file()}


def cpu_model() -> str:
    names = re.findall(r"^model name\s*:\s*(.+)$", Path("/proc/cpuinfo").read_text(), re.M)
    return names[0] if names else platform.processor()


def test_a_compiled_model_blends_and_ratio_one_matches_its_full_prefill(own_server: Server) -> None:
    documents = [capital_document(country, city) for country, city in CAPITALS.items()]
    ask_capital(own_server, "Italy", documents, "blend")  # stores every chunk
    order = documents[::-1]
    full = ask_capital(own_server, "Italy", order, "full")
    # vLLM's own forward, nothing of the blend in it: it answered garbage while the connector's
    # start-up check converted the model's rotary table in place under the compiled graph.
    assert "Rome" in first_sentence(full), f"on {cpu_model()}: {first_sentence(full)!r}"
    blended = ask_capital(own_server, "Italy", order, "blend", ratio=1.0)
    assert blended["blend"]["chunks_hit"] == len(CAPITALS)
    assert first_sentence(blended) == first_sentence(full)
    assert divergence(first_token_distribution(full), first_token_distribution(blended)) < 0.05


def test_a_restart_on_the_same_data_directory_compiles_nothing_again(own_server: Server) -> None:
    documents = [capital_document("Italy", "Rome")]
    before = ask_capital(own_server, "Italy", documents, "full")
    kept = compiled_code(own_server.data_dir)
    assert kept, "the compiled code is not kept with the server's data"
    assert own_server.process is not None
    own_server.process.send_signal(signal.SIGINT)
    own_server.process.wait(timeout=60)
    started = own_server.log.stat().st_size
    with running_server(own_server.data_dir, OWN_SERVER) as restarted:
        after = ask_capital(restarted, "Italy", documents, "full")
        restart_log = own_server.log.read_text(errors="replace")[started:]
    assert first_sentence(after) == first_sentence(before)
    assert "Compiling model again" not in restart_log
    assert compiled_code(own_server.data_dir) == kept, "the restart compiled the model again"
