"""The interleaved slow-hit benchmark: its memory tier holds one set of chunks and not a chunk
more, where each request's chunks came from is read off the store's counters, and each pair of
requests gives one ratio."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from engine.kvstore.entry import ChunkKV
from engine.kvstore.keys import ChunkKey
from engine.kvstore.memory import MemoryTier
from load_tests.bench_slow_hits import (
    hit_sources,
    memory_tier_bytes,
    pair_summary,
    parse_tiers,
    raw_chunk_bytes,
)

CONFIG = {
    "num_hidden_layers": 3,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "hidden_size": 32,
}


def chunk(seed: int, tokens: int) -> ChunkKV:
    shape = (CONFIG["num_hidden_layers"], tokens, 2, 8)
    generator = torch.Generator().manual_seed(seed)
    keys = torch.randn(shape, generator=generator).to(torch.bfloat16)
    return ChunkKV(keys, keys.clone(), list(range(seed, seed + tokens)))


def test_chunk_bytes_from_the_config_are_what_the_memory_tier_counts(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text(json.dumps(CONFIG))
    assert raw_chunk_bytes(tmp_path, 5, itemsize=2) == chunk(0, 5).nbytes


def test_the_memory_tier_holds_one_set_and_a_new_set_evicts_all_of_the_old() -> None:
    first = [chunk(seed, 4) for seed in range(3)]
    second = [chunk(seed, 4) for seed in range(10, 13)]
    tier = MemoryTier(memory_tier_bytes(3, first[0].nbytes))
    keys = {id(entry): ChunkKey.for_chunk("m", entry.token_ids) for entry in first + second}
    for entry in first:
        tier.put(keys[id(entry)], entry)
    assert all(tier.contains(keys[id(entry)]) for entry in first)
    for entry in second:
        tier.put(keys[id(entry)], entry)
    assert not any(tier.contains(keys[id(entry)]) for entry in first)
    assert all(tier.contains(keys[id(entry)]) for entry in second)


def test_hit_sources_are_the_hit_counters_that_grew() -> None:
    before = {"memory_hits": 4, "disk_hits": 2, "memory_misses": 1, "pending_hits": 0}
    after = {"memory_hits": 4, "disk_hits": 18, "memory_misses": 17, "pending_hits": 3}
    assert hit_sources(before, after) == {"disk": 16}
    assert hit_sources(after, after) == {}


def test_pair_summary_ratios_pair_each_slow_hit_with_its_memory_hit() -> None:
    row = pair_summary([4.0, 3.0, 6.0], [4.0, 2.0, 4.0])
    assert row["pair_ratios"] == [1.0, 1.5, 1.5]
    assert row["median_pair_ratio"] == 1.5
    assert row["ratio_of_medians"] == 1.0
    assert row["ratio_of_fastest"] == 1.5
    with pytest.raises(ValueError, match="equal"):
        pair_summary([1.0], [])


def test_tiers_are_checked() -> None:
    assert parse_tiers("redis, disk") == ["redis", "disk"]
    with pytest.raises(Exception, match="tiers are some of"):
        parse_tiers("memory")
