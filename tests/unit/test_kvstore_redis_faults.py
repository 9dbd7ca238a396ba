"""Redis failures are misses: down at start, killed mid-entry, frozen (timeout), full; recovery."""

import logging
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from engine.kvstore.codec import CorruptEntry
from engine.kvstore.memory import MemoryTier
from engine.kvstore.redis_tier import RedisTier
from engine.kvstore.store import ChunkKVStore
from tests.redis_server import RedisServer, running_redis
from tests.unit.kv_entries import SECRET, expect, key_of, make_entry, same

ENTRY = make_entry(0, layers=6)
KEY = key_of(ENTRY)
RETRY_S = 0.05
RECOVERY_ATTEMPTS = 400


def redis_store(server: RedisServer, timeout_s: float = 2.0) -> ChunkKVStore:
    """Memory in front of Redis only, retrying soon after a failure."""
    tier = RedisTier(server.url, SECRET, timeout_s=timeout_s, first_retry_s=RETRY_S)
    return ChunkKVStore(MemoryTier(1 << 20), tier)


def outage_warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        record.getMessage()
        for record in caplog.records
        if record.name == "engine.kvstore.redis_tier" and record.levelno >= logging.WARNING
    ]


def eventually(step: Callable[[], bool]) -> bool:
    """Repeat `step` until it succeeds (the tier retries Redis on its own schedule)."""
    for _ in range(RECOVERY_ATTEMPTS):
        if step():
            return True
        threading.Event().wait(RETRY_S / 2)
    return False


def stored_in_redis(store: ChunkKVStore) -> bool:
    """Put the entry and wait for its writes; whether Redis took it."""
    store.put(KEY, ENTRY)
    store.flush()
    return store.backing[0].contains(KEY)


def redis_hit(store: ChunkKVStore) -> bool:
    """Whether a lookup that memory cannot answer is served (by Redis)."""
    store.memory.delete(KEY)
    return same(store.get(KEY, expect(ENTRY)), ENTRY)


@pytest.fixture
def redis_server(tmp_path: Path) -> Iterator[RedisServer]:
    with running_redis(tmp_path / "redis") as server:
        yield server


def test_redis_down_at_start_is_a_miss_until_it_comes_up(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    server = RedisServer(tmp_path / "redis")  # not started yet
    with redis_store(server) as store:
        for _ in range(5):
            store.put(KEY, ENTRY)
            store.flush()
            store.memory.delete(KEY)
            assert store.get(KEY, expect(ENTRY)) is None
        assert store.stats()["redis_errors"] >= 1
        assert len(outage_warnings(caplog)) == 1
        server.start()
        try:
            assert eventually(lambda: stored_in_redis(store))
            assert eventually(lambda: redis_hit(store))
        finally:
            server.kill()
    assert "back" in outage_warnings(caplog)[-1]


def test_redis_killed_mid_entry_fails_only_that_stream(
    redis_server: RedisServer, caplog: pytest.LogCaptureFixture
) -> None:
    with redis_store(redis_server) as store:
        large = make_entry(1, layers=12, tokens=512)  # 32 KiB layers: most are read on demand
        store.put(key_of(large), large)
        store.flush()
        store.memory.delete(key_of(large))
        stream = store.open_layers(key_of(large), expect(large))
        assert stream is not None
        redis_server.kill()
        with pytest.raises(CorruptEntry):
            list(stream)  # the first read and the read-ahead hold a few layers, never twelve
        for _ in range(3):
            assert store.get(KEY, expect(ENTRY)) is None
            assert store.open_layers(KEY, expect(ENTRY)) is None
        assert store.stats()["redis_errors"] >= 1
        assert len(outage_warnings(caplog)) == 1
        redis_server.start()  # empty: the entry is written again once Redis is back
        assert eventually(lambda: stored_in_redis(store))
        assert eventually(lambda: redis_hit(store))


def test_a_frozen_redis_times_out_as_a_miss(redis_server: RedisServer) -> None:
    with redis_store(redis_server, timeout_s=0.2) as store:
        store.put(KEY, ENTRY)
        store.flush()
        store.memory.delete(KEY)
        redis_server.pause()
        try:
            assert store.get(KEY, expect(ENTRY)) is None
            assert store.stats()["redis_errors"] == 1
            other = make_entry(1)
            store.put(key_of(other), other)  # queued for a frozen Redis: served from memory
            assert store.get(key_of(other), expect(other)) is other
        finally:
            redis_server.resume()
        assert eventually(lambda: redis_hit(store))


def test_a_full_redis_refuses_writes_but_serves_reads(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    redis_server = running_redis(tmp_path / "redis", maxmemory="3mb", policy="noeviction")
    with redis_server as server, redis_store(server) as store:
        store.put(KEY, ENTRY)
        store.flush()
        for seed in range(1, 5):  # 4 MiB each: the first fills Redis, the others are refused
            big = make_entry(seed, layers=64, tokens=512)
            store.put(key_of(big), big)
            store.flush()
        stats = store.stats()
        assert stats["redis_errors"] >= 1 and stats["write_errors"] == 0
        assert len([m for m in outage_warnings(caplog) if "refuses writes" in m]) == 1
        assert redis_hit(store)
