"""The TTFT benchmark's tier phases: each serves its chunks from the tier it names, in its format,
and the stored entries' bytes per token are measured from what the tier really holds."""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

from engine.kvstore.entry import ChunkKV
from engine.kvstore.keys import ChunkKey
from engine.kvstore.layer_format import LayerFormat
from engine.kvstore.mac import EntryMac
from engine.kvstore.store import ChunkKVStore
from load_tests.bench_blend import parse_modes, parse_phases, phase_rows
from load_tests.bench_tiers import PHASES, TOO_SMALL_FOR_A_CHUNK, measure_disk, measure_redis
from load_tests.redis_launcher import running_redis

SECRET = bytes(range(32))
TOKENS = 1024


@pytest.fixture
def redis_url(tmp_path: Path) -> Iterator[str]:
    with running_redis(tmp_path / "redis") as url:
        yield url


def chunk_bigger_than_a_tiny_tier() -> ChunkKV:
    """A bf16 chunk of 2 MiB raw (1 MiB in int8, plus scales): more than a tiny tier holds."""
    generator = torch.Generator().manual_seed(0)
    shape = (2, TOKENS, 2, 128)
    keys = torch.randn(shape, generator=generator).to(torch.bfloat16)
    values = torch.randn(shape, generator=generator).to(torch.bfloat16)
    return ChunkKV(keys, values, list(range(TOKENS)))


@pytest.mark.parametrize("name", list(PHASES))
def test_each_phase_keeps_chunks_only_where_it_says_it_serves_them(
    name: str, tmp_path: Path, redis_url: str
) -> None:
    phase = PHASES[name]
    overrides = phase.blend_overrides(redis_url)
    entry = chunk_bigger_than_a_tiny_tier()
    assert entry.encoded_nbytes(LayerFormat.INT8) > TOO_SMALL_FOR_A_CHUNK
    key = ChunkKey.for_chunk(f"model-of-{name}", entry.token_ids)
    store = ChunkKVStore.create(
        phase.memory_bytes,
        tmp_path / "store",
        overrides["disk_bytes"],
        secret=SECRET,
        redis_url=overrides["redis_url"] or None,
        layer_format=LayerFormat[overrides["slow_tier_format"].upper()],
    )
    store.put(key, entry)
    store.close()  # waits for the background writes

    assert store.memory.contains(key) == (phase.serves_from == "memory")
    on_disk = measure_disk(tmp_path / "store", SECRET)
    assert on_disk.entries == (0 if phase.needs_redis else 1)
    if phase.serves_from == "disk":
        assert (on_disk.tokens, on_disk.formats) == (TOKENS, (phase.slow_format,))
    if phase.needs_redis:
        in_redis = measure_redis(redis_url, SECRET)
        assert (in_redis.tokens, in_redis.formats) == (TOKENS, (phase.slow_format,))
        written = entry.to_bytes(EntryMac(SECRET, key), LayerFormat[phase.slow_format.upper()])
        assert in_redis.bytes == len(written)


def test_compressed_entries_measure_fewer_bytes_per_token_than_raw(tmp_path: Path) -> None:
    entry = chunk_bigger_than_a_tiny_tier()
    measured = {}
    for layer_format in LayerFormat:
        directory = tmp_path / layer_format.name
        store = ChunkKVStore.create(1, directory, secret=SECRET, layer_format=layer_format)
        store.put(ChunkKey.for_chunk("model", entry.token_ids), entry)
        store.close()
        measured[layer_format] = measure_disk(directory, SECRET).bytes_per_token
    raw_bytes_per_token = 2 * 2 * 2 * 128 * 2  # layers x (K, V) x heads x dim x bf16
    assert raw_bytes_per_token < measured[LayerFormat.RAW] < raw_bytes_per_token + 40
    assert 0.5 < measured[LayerFormat.INT8] / measured[LayerFormat.RAW] < 0.53
    assert 0.6 < measured[LayerFormat.LOSSLESS] / measured[LayerFormat.RAW] < 0.75


def test_entries_signed_with_another_secret_are_not_counted_as_measured(tmp_path: Path) -> None:
    entry = chunk_bigger_than_a_tiny_tier()
    store = ChunkKVStore.create(1, tmp_path, secret=SECRET)
    store.put(ChunkKey.for_chunk("model", entry.token_ids), entry)
    store.close()
    with pytest.raises(ValueError, match="secret"):
        measure_disk(tmp_path, bytes(range(1, 33)))


def test_rows_compare_each_slow_tier_to_the_memory_tier_mode_by_mode() -> None:
    rows = phase_rows(
        {
            "memory": {"full": [4.0, 4.2, 3.8], "blend@0.15": [1.0, 1.2, 0.8], "prefix": [4.0]},
            "redis": {"full": [4.4], "blend@0.15": [1.1, 1.3, 1.2]},
        }
    )
    by_key = {(row["phase"], row["mode"]): row for row in rows}
    assert by_key[("redis", "blend@0.15")]["vs_memory"] == pytest.approx(1.2)
    assert by_key[("redis", "full")]["vs_memory"] == pytest.approx(1.1)
    assert by_key[("redis", "blend@0.15")]["speedup_vs_full"] == pytest.approx(4.4 / 1.2, abs=0.01)
    assert by_key[("memory", "blend@0.15")]["vs_memory"] is None
    assert by_key[("memory", "blend@0.15")]["fastest_ttft_s"] == pytest.approx(0.8)


def test_without_full_rows_keep_their_ratio_to_memory_but_no_speed_up() -> None:
    rows = phase_rows({"memory": {"reuse": [0.2, 0.4]}, "disk": {"reuse": [0.3, 0.36]}})
    disk = next(row for row in rows if row["phase"] == "disk")
    assert disk["speedup_vs_full"] is None
    assert disk["vs_memory"] == pytest.approx(1.1)


def test_phases_are_chosen_by_name_in_order_and_unknown_names_are_refused() -> None:
    assert parse_phases("redis, memory") == ["redis", "memory"]
    with pytest.raises(argparse.ArgumentTypeError, match="redis-int8"):
        parse_phases("memory,ssd")
    with pytest.raises(argparse.ArgumentTypeError):
        parse_phases(",")


def test_a_run_can_time_fewer_modes_even_without_full() -> None:
    assert parse_modes("full, reuse,blend@0.15") == ["full", "reuse", "blend@0.15"]
    assert parse_modes("reuse,blend@0.15") == ["reuse", "blend@0.15"]
    with pytest.raises(argparse.ArgumentTypeError):
        parse_modes(",")
    assert parse_modes("full,blend@0.1/metric=qv,blend@0.2/mass=0.5")[1:] == [
        "blend@0.1/metric=qv",
        "blend@0.2/mass=0.5",
    ]
    for bad in ("full,blend@1.5", "full,blend@0.1/window=3", "full,sideways"):
        with pytest.raises(argparse.ArgumentTypeError):
            parse_modes(bad)
