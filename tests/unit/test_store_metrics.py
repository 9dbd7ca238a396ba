"""The chunk store's statistics and the library's ingest progress reach /metrics."""

from __future__ import annotations

from pathlib import Path

from prometheus_client import CollectorRegistry, generate_latest

from gateway.http.library_metrics import LibraryProgressCollector
from gateway.http.store_metrics import ChunkStoreCollector, split_stat
from retriever.ingest.chunking import Chunk
from retriever.library.document_store import DocumentStore
from retriever.library.records import DEFAULT_PROJECT, DocumentDraft


def test_stat_names_split_into_tier_and_stat() -> None:
    assert split_stat("disk_evictions") == ("disk", "evictions")
    assert split_stat("redis_errors") == ("redis", "errors")
    assert split_stat("pending_writes") == ("store", "pending_writes")
    assert split_stat("misses") == ("store", "misses")


def test_the_latest_snapshot_is_exported_per_tier() -> None:
    collector, registry = ChunkStoreCollector(), CollectorRegistry()
    registry.register(collector)
    assert "ragblend_chunk_store" not in generate_latest(registry).decode()
    collector.update({"memory_bytes": 10, "disk_bytes": 200, "disk_evictions": 3, "misses": 1})
    collector.update({})  # a report without a snapshot keeps the last one
    text = generate_latest(registry).decode()
    assert 'ragblend_chunk_store_bytes{tier="disk"} 200.0' in text
    assert 'ragblend_chunk_store_bytes{tier="memory"} 10.0' in text
    assert 'ragblend_chunk_store_evictions_total{tier="disk"} 3.0' in text
    assert 'ragblend_chunk_store_misses_total{tier="store"} 1.0' in text
    assert "# TYPE ragblend_chunk_store_bytes gauge" in text


def test_library_progress_counts_documents_by_status_and_the_precompute_backlog(
    tmp_path: Path,
) -> None:
    store = DocumentStore(tmp_path / "documents.sqlite3")
    chunks = [Chunk("x", [1, 2], 0, 1), Chunk("y", [3], 3, 4)]
    store.add_documents([DocumentDraft("a", "hash-a", {}, 4, chunks, DEFAULT_PROJECT)])
    store.set_status("a", "indexed")
    collector, registry = LibraryProgressCollector(), CollectorRegistry()
    registry.register(collector)
    assert "ragblend_documents" not in generate_latest(registry).decode()
    collector.store = store
    text = generate_latest(registry).decode()
    assert 'ragblend_documents{status="indexed"} 1.0' in text
    assert 'ragblend_documents{status="cached"} 0.0' in text
    assert "ragblend_precompute_pending_chunks 2.0" in text
    store.close()
