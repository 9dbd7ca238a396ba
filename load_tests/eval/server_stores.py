"""What a server's chunk store served and holds: its per-tier counters from /metrics and the
bytes per token of the entries in its disk tier, read back and verified.

Split out of ``format_gap.py``, which reports both next to the answers of each format.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import httpx

STORE_STATS = ("hits", "misses", "pending_hits", "recomputed_instead")


def store_counters(client: httpx.Client) -> dict[str, float]:
    """The server's chunk-store counters from /metrics, as ``<tier>_<stat>``; none if it is gone."""
    from prometheus_client.parser import text_string_to_metric_families

    try:
        reply = client.get("/metrics")
        reply.raise_for_status()
    except httpx.HTTPError as error:
        print(f"no chunk-store counters from {client.base_url}: {error!r}", file=sys.stderr)
        return {}
    counters = {}
    for family in text_string_to_metric_families(reply.text):
        stat = family.name.removeprefix("ragblend_chunk_store_")
        if stat in STORE_STATS and family.name != stat:
            for sample in family.samples:
                if sample.name.endswith("_total"):
                    counters[f"{sample.labels['tier']}_{stat}"] = sample.value
    return counters


def stored_entries(data_dir: Path) -> dict[str, Any]:
    """Bytes per token of the entries in a server's disk tier, read back and verified."""
    from engine.kvstore.secret import load_or_create_secret
    from load_tests.bench_tiers import measure_disk

    chunk_kv = data_dir / "chunk_kv"
    return measure_disk(chunk_kv / "store", load_or_create_secret(chunk_kv / "secret")).to_dict()
