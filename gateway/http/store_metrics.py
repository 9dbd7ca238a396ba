"""The chunk KV store's own counters on ``GET /metrics``, as the engine's worker last reported them.

The store lives in the engine's worker process; each blended request brings back a snapshot
of its statistics (``BlendStats.store``). The latest one is exported per tier: sizes as gauges
(``ragblend_chunk_store_bytes{tier}``, ``..._entries``, ``..._pending_writes``, the Redis tier's
``..._latency_us`` and ``..._bytes_per_s``) and everything else as counters
(``ragblend_chunk_store_hits_total{tier}``, ``..._evictions_total``,
``..._errors_total{tier="redis"}``, ...); store-wide counters carry ``tier="store"``.
"""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.core import REGISTRY, CounterMetricFamily, GaugeMetricFamily, Metric

TIERS = ("memory", "disk", "redis")
GAUGES = frozenset({"bytes", "entries", "pending_writes", "latency_us", "bytes_per_s"})
"""Levels, not totals: sizes, and the Redis tier's measured round trip and read bandwidth
(``engine/kvstore/load_meter.py``)."""


def split_stat(name: str) -> tuple[str, str]:
    """``"disk_evictions"`` -> ("disk", "evictions"); store-wide ``"misses"`` -> ("store", ...)."""
    tier, _, rest = name.partition("_")
    return (tier, rest) if tier in TIERS and rest else ("store", name)


class ChunkStoreCollector:
    def __init__(self) -> None:
        self._snapshot: dict[str, int] = {}

    def update(self, snapshot: dict[str, int]) -> None:
        if snapshot:
            self._snapshot = dict(snapshot)

    def collect(self) -> Iterator[Metric]:
        families: dict[str, CounterMetricFamily | GaugeMetricFamily] = {}
        for name, value in sorted(self._snapshot.items()):
            tier, stat = split_stat(name)
            metric = f"ragblend_chunk_store_{stat}"
            if metric not in families:
                kind = GaugeMetricFamily if stat in GAUGES else CounterMetricFamily
                help_text = f"Chunk KV store: {stat.replace('_', ' ')}, by tier."
                families[metric] = kind(metric, help_text, labels=["tier"])
            families[metric].add_metric([tier], float(value))
        yield from families.values()


CHUNK_STORE = ChunkStoreCollector()
REGISTRY.register(CHUNK_STORE)
