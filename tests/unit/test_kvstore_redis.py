"""Redis tier against a real redis-server: round trips, sharing between stores, damaged entries."""

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

from engine.kvstore.codec import CorruptEntry
from engine.kvstore.entry import ChunkKV
from engine.kvstore.expect import EntryExpectation
from engine.kvstore.layer_format import LayerFormat
from engine.kvstore.redis_tier import KEY_PREFIX, RedisTier
from engine.kvstore.store import ChunkKVStore
from tests.redis_server import RedisServer, running_redis
from tests.unit.kv_entries import OTHER_SECRET, SECRET, expect, key_of, make_entry, same

ENTRY = make_entry(0, layers=5)
KEY = key_of(ENTRY)


@pytest.fixture
def redis_server(tmp_path: Path) -> Iterator[RedisServer]:
    with running_redis(tmp_path / "redis") as server:
        yield server


@pytest.fixture
def tier(redis_server: RedisServer) -> Iterator[RedisTier]:
    tier = RedisTier(redis_server.url, SECRET)
    yield tier
    tier.close()


def store_on(directory: Path, redis_server: RedisServer, secret: bytes = SECRET) -> ChunkKVStore:
    """A store as a server builds it: memory, its own disk directory, the shared Redis."""
    return ChunkKVStore.create(
        1 << 20, directory, secret=secret, redis_url=redis_server.url, redis_timeout_s=2.0
    )


def test_an_entry_round_trips_whole_and_layer_by_layer(tier: RedisTier) -> None:
    tier.put(KEY, ENTRY)
    assert tier.contains(KEY) and tier.keys() == [KEY]
    assert same(tier.get(KEY), ENTRY)
    stream = tier.load_layers(KEY)
    assert stream is not None and stream.token_ids == ENTRY.token_ids
    for index, k, v in stream:
        assert torch.equal(k, ENTRY.keys[index]) and torch.equal(v, ENTRY.values[index])
    stats = tier.stats()
    assert (stats["puts"], stats["hits"], stats["misses"], stats["errors"]) == (1, 2, 0, 0)


def test_a_second_put_of_a_stored_chunk_sends_nothing(tier: RedisTier) -> None:
    tier.put(KEY, ENTRY)
    tier.put(KEY, make_entry(0, layers=5))
    assert tier.stats()["present"] == 1


def recomputed(entry: ChunkKV) -> ChunkKV:
    """The same chunk's KV computed another way (behind the prefix after in context)."""
    return ChunkKV(entry.keys + 1, entry.values - 1, entry.token_ids)


def test_a_replacement_overwrites_the_stored_entry(tier: RedisTier) -> None:
    tier.put(KEY, ENTRY)
    tier.replace(KEY, recomputed(ENTRY))
    assert same(tier.get(KEY), recomputed(ENTRY)) and tier.stats()["puts"] == 2


def test_a_server_replacing_a_shared_entry_never_leaves_the_other_a_miss(
    tmp_path: Path, redis_server: RedisServer
) -> None:
    with store_on(tmp_path / "a", redis_server) as writer:
        writer.put(KEY, ENTRY)
        writer.flush()
        reader = RedisTier(redis_server.url, SECRET)
        writer.put(KEY, recomputed(ENTRY), replace=True)
        deadline = time.monotonic() + 10
        while not same(found := reader.get(KEY), recomputed(ENTRY)):
            assert same(found, ENTRY)  # the old entry until the new one is there, never a miss
            assert time.monotonic() < deadline, "the replacement never reached Redis"
        reader.close()


LARGE = make_entry(2, layers=5, tokens=1024)
"""Layers of 64 KiB: beyond the head fetched at the open, each layer is a ranged read of its own."""


@pytest.mark.parametrize("change", ["replaced", "evicted"])
def test_an_entry_changed_between_two_layer_reads_is_a_miss_not_deleted(
    tier: RedisTier, redis_server: RedisServer, change: str
) -> None:
    key = key_of(LARGE)
    tier.put(key, LARGE)
    other_server = RedisTier(redis_server.url, SECRET)
    stream = tier.load_layers(key)
    assert stream is not None
    layers = iter(stream)
    next(layers)
    if change == "replaced":  # another server settling the chunk
        other_server.replace(key, recomputed(LARGE))
    else:
        other_server.delete(key)
    with pytest.raises(CorruptEntry, match="replaced or evicted while it was read"):
        list(layers)
    stream.close()
    stats = tier.stats()
    assert (stats["changed"], stats["corrupt"]) == (1, 0)
    if change == "replaced":
        assert same(tier.get(key), recomputed(LARGE))  # the newer entry is kept, whole
    other_server.close()


def test_a_missing_or_deleted_entry_is_a_miss(tier: RedisTier) -> None:
    assert tier.get(KEY) is None and tier.load_layers(KEY) is None
    tier.put(KEY, ENTRY)
    assert tier.delete(KEY) and not tier.contains(KEY)
    assert tier.get(KEY) is None and tier.stats()["misses"] == 3


def test_a_chunk_computed_by_one_server_is_a_hit_on_another(
    tmp_path: Path, redis_server: RedisServer
) -> None:
    with store_on(tmp_path / "a", redis_server) as first:
        first.put(KEY, ENTRY)
    with store_on(tmp_path / "b", redis_server) as second:
        stream = second.open_layers(KEY, expect(ENTRY))
        assert stream is not None
        assert [index for index, _, _ in stream] == list(range(ENTRY.num_layers))
        second.flush()
        stats = second.stats()
        assert (stats["redis_hits"], stats["disk_hits"], stats["misses"]) == (1, 0, 0)
        assert second.memory.contains(KEY) and second.backing[0].contains(KEY)  # promoted
        assert same(second.get(KEY, expect(ENTRY)), ENTRY)
        assert second.stats()["memory_hits"] == 1


def test_writes_reach_disk_and_redis(tmp_path: Path, redis_server: RedisServer) -> None:
    with store_on(tmp_path / "a", redis_server) as store:
        store.put(KEY, ENTRY)
        store.flush()
        assert [tier.contains(KEY) for tier in store.backing] == [True, True]
        assert store.stats()["pending_writes"] == 0


def test_an_entry_signed_with_another_secret_is_refused_and_left(
    tmp_path: Path, redis_server: RedisServer
) -> None:
    with store_on(tmp_path / "a", redis_server, OTHER_SECRET) as other:
        other.put(KEY, ENTRY)
    with store_on(tmp_path / "b", redis_server) as store:
        assert store.get(KEY, expect(ENTRY)) is None
        assert store.stats()["redis_rejected"] == 1 and store.stats()["rejected"] == 1
    with redis_server.client() as client:
        assert client.exists(KEY_PREFIX + KEY)  # still valid for the servers that share its secret


def test_a_damaged_layer_fails_the_stream_and_is_deleted(
    tmp_path: Path, redis_server: RedisServer
) -> None:
    with store_on(tmp_path / "a", redis_server) as store:
        store.put(KEY, ENTRY)
        store.flush()
        store.memory.delete(KEY)
        store.backing[0].delete(KEY)
        with redis_server.client() as client:
            size = client.strlen(KEY_PREFIX + KEY)
            last = client.getrange(KEY_PREFIX + KEY, size - 1, size - 1)
            client.setrange(KEY_PREFIX + KEY, size - 1, bytes([last[0] ^ 0x01]))
        stream = store.open_layers(KEY, expect(ENTRY))
        assert stream is not None
        with pytest.raises(CorruptEntry):
            list(stream)
        assert store.stats()["redis_corrupt"] == 1
        assert not store.contains(KEY)
        assert store.get(KEY, expect(ENTRY)) is None


@pytest.mark.parametrize("kept", [0, 20, 200], ids=["empty", "in-header", "in-layers"])
def test_a_truncated_entry_is_a_miss_and_deleted(tier: RedisTier, redis_server, kept) -> None:
    tier.put(KEY, ENTRY)
    with redis_server.client() as client:
        data = client.get(KEY_PREFIX + KEY)
        client.set(KEY_PREFIX + KEY, data[:kept])
    assert tier.get(KEY) is None
    assert not tier.contains(KEY)
    assert tier.stats()["corrupt"] == 1


def test_an_entry_stored_under_another_key_is_refused(tier: RedisTier, redis_server) -> None:
    other = make_entry(1, layers=5)
    tier.put(key_of(other), other)
    with redis_server.client() as client:
        client.copy(KEY_PREFIX + key_of(other), KEY_PREFIX + KEY)
    assert tier.get(KEY) is None and tier.stats()["corrupt"] == 1
    assert same(tier.get(key_of(other)), other)


def test_an_int8_tier_stores_less_and_streams_close_kv(redis_server: RedisServer) -> None:
    entry = make_entry(2, layers=5, tokens=64)
    tier = RedisTier(redis_server.url, SECRET, layer_format=LayerFormat.INT8)
    tier.put(key_of(entry), entry)
    with redis_server.client() as client:
        stored = client.strlen(KEY_PREFIX + key_of(entry))
    assert stored == entry.encoded_nbytes(LayerFormat.INT8) < entry.encoded_nbytes()
    stream = tier.load_layers(key_of(entry))
    assert stream is not None
    for index, k, _ in stream:
        error = (k.float() - entry.keys[index].float()).norm() / entry.keys[index].float().norm()
        assert error < 0.01
    tier.close()


def test_a_lossless_tier_estimates_loads_at_the_size_entries_really_take(
    redis_server: RedisServer,
) -> None:
    entry = make_entry(3, layers=4, tokens=2048)  # layers beyond the first read
    tier = RedisTier(redis_server.url, SECRET, layer_format=LayerFormat.LOSSLESS)
    tier.put(key_of(entry), entry)
    assert same(tier.get(key_of(entry)), entry)
    with redis_server.client() as client:
        stored = client.strlen(KEY_PREFIX + key_of(entry))
    nominal = entry.encoded_nbytes(LayerFormat.LOSSLESS)
    share = stored / nominal
    assert share < 0.9

    big = EntryExpectation(list(range(200_000)), 4, 2, 8, entry.dtype)  # bandwidth-bound
    bandwidth = tier.stats()["bytes_per_s"]
    uncoded = 4 * 2 * 200_000 * 2 * 8 * entry.dtype.itemsize
    # The layers' share, not the header's: close to the whole entry's for entries this size.
    assert tier.load_seconds(big) == pytest.approx(share * uncoded / bandwidth, rel=0.05)
    tier.close()
