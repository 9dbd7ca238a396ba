"""Every ragblend metric the README's metrics table lists is served by ``GET /metrics`` under that
name and type, fed as the running server feeds it (the chunk store's from a real store's
statistics); vLLM's rows are checked against a live engine in tests/integration/test_endpoints.py.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from prometheus_client.parser import text_string_to_metric_families

from engine.kvstore.disk import DiskTier
from engine.kvstore.memory import MemoryTier
from engine.kvstore.redis_tier import RedisTier
from engine.kvstore.store import ChunkKVStore
from gateway.app import create_app
from gateway.http.library_metrics import LIBRARY_PROGRESS
from gateway.http.metrics import TIME_TO_FIRST_TOKEN
from gateway.http.store_metrics import CHUNK_STORE
from gateway.settings import Settings
from retriever.library.document_store import DocumentStore
from retriever.objects.rag_objects import RagObjects
from tests.unit.kv_entries import SECRET

README = Path(__file__).resolve().parents[2] / "README.md"
ROW = re.compile(r"^\| `((?:ragblend_|vllm:)\w+)` \| (counter|gauge|histogram) \|", re.MULTILINE)


def documented(prefix: str) -> dict[str, str]:
    """Metric name -> type, from the README's metrics table."""
    rows = dict(ROW.findall(README.read_text(encoding="utf-8")))
    return {name: kind for name, kind in rows.items() if name.startswith(prefix)}


def served(text: str) -> dict[str, str]:
    """Metric name -> type as a scraper reads them; counters under their ``_total`` name."""
    return {
        f"{family.name}_total" if family.type == "counter" else family.name: family.type
        for family in text_string_to_metric_families(text)
    }


@pytest.fixture
def fed(tmp_path: Path) -> Iterator[RagObjects]:
    """The collectors fed as in a running server: a fresh store's snapshot (all its statistics,
    at zero), an open library, and its OpenAI objects for the app's state."""
    store = ChunkKVStore(
        MemoryTier(1 << 20),
        DiskTier(tmp_path / "kv", SECRET, 1 << 20),
        RedisTier("redis://127.0.0.1:1/0", SECRET),  # never called: only its counters are read
    )
    CHUNK_STORE.update(store.stats())
    store.close()
    documents = DocumentStore(tmp_path / "documents.sqlite3")
    LIBRARY_PROGRESS.store = documents
    objects = RagObjects(tmp_path / "documents.sqlite3")
    try:
        yield objects
    finally:
        LIBRARY_PROGRESS.store = None
        objects.close()
        documents.close()


def test_the_table_lists_ragblend_s_and_vllm_s_metrics() -> None:
    assert len(documented("ragblend_")) >= 20
    assert {
        "vllm:num_requests_running",
        "vllm:num_requests_waiting",
        "vllm:kv_cache_usage_perc",
        "vllm:e2e_request_latency_seconds",
        "vllm:inter_token_latency_seconds",
        "vllm:request_queue_time_seconds",
    } <= set(documented("vllm:"))


def test_every_documented_ragblend_metric_is_served_with_its_type(fed: RagObjects) -> None:
    app = create_app(Settings(model="m"))
    app.state.ragblend.rag_objects = fed
    api = TestClient(app)
    text = api.get("/metrics").text
    exported = served(text)
    for name, kind in documented("ragblend_").items():
        assert exported.get(name) == kind, f"{name}: documented {kind}, served {exported.get(name)}"


def test_a_first_token_in_two_milliseconds_is_told_from_one_in_ten() -> None:
    TIME_TO_FIRST_TOKEN.labels("/test/ttft").observe(0.002)
    text = TestClient(create_app(Settings(model="m"))).get("/metrics").text
    [family] = [
        family
        for family in text_string_to_metric_families(text)
        if family.name == "ragblend_time_to_first_token_seconds"
    ]
    counts = {
        float(sample.labels["le"]): sample.value
        for sample in family.samples
        if sample.name.endswith("_bucket") and sample.labels["route"] == "/test/ttft"
    }
    assert (counts[0.001], counts[0.0025], counts[0.01]) == (0, 1, 1)
