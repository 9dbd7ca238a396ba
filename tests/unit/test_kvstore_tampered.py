"""Tampered, foreign and ill-fitting chunk-KV entries are misses: counted, logged, deleted.

These are the cases that took a real server down or changed its answers: a well-formed file with
fewer tokens than its chunk, zeroed K/V under a recomputed checksum, and read errors of types
the engine did not catch.
"""

import logging
from pathlib import Path

import pytest

from engine.kvstore.disk import DiskTier
from engine.kvstore.entry import ChunkKV
from engine.kvstore.store import ChunkKVStore
from tests.unit.kv_entries import (
    OTHER_SECRET,
    SECRET,
    expect,
    forged_bytes,
    key_of,
    make_entry,
    old_format_bytes,
    same,
    zeroed,
)

CHUNK = make_entry(0)
KEY = key_of(CHUNK)
LOOKUPS = {
    "get": lambda store: store.get(KEY, expect(CHUNK)),
    "prefetch": lambda store: store.open_layers(KEY, expect(CHUNK)),
}


@pytest.fixture
def store(tmp_path: Path):
    with ChunkKVStore.create(1 << 20, tmp_path / "kv", secret=SECRET) as store:
        yield store


def entry_file(store: ChunkKVStore) -> Path:
    return store.backing[0].directory / f"{KEY}.kv"


def assert_healed(store: ChunkKVStore) -> None:
    """The bad entry is gone everywhere, and the real one can take its place."""
    assert not store.contains(KEY) and not entry_file(store).exists()
    store.put(KEY, CHUNK)
    store.flush()
    store.memory.delete(KEY)
    assert same(store.get(KEY, expect(CHUNK)), CHUNK)


@pytest.mark.parametrize("lookup", LOOKUPS.values(), ids=LOOKUPS.keys())
@pytest.mark.parametrize("kv", [CHUNK, zeroed(CHUNK)], ids=["same-kv", "zeroed-kv"])
def test_an_entry_forged_with_a_recomputed_unkeyed_checksum_is_a_miss(
    store: ChunkKVStore, kv: ChunkKV, lookup
) -> None:
    entry_file(store).write_bytes(forged_bytes(kv))
    assert lookup(store) is None
    stats = store.stats()
    assert (stats["corrupt"], stats["misses"], stats["memory_entries"]) == (1, 1, 0)
    assert_healed(store)


def write_with_other_secret(store: ChunkKVStore) -> None:
    DiskTier(store.backing[0].directory, OTHER_SECRET).put(KEY, CHUNK)


def write_old_format(store: ChunkKVStore) -> None:
    entry_file(store).write_bytes(old_format_bytes(CHUNK))


@pytest.mark.parametrize("lookup", LOOKUPS.values(), ids=LOOKUPS.keys())
@pytest.mark.parametrize(
    "plant", [write_with_other_secret, write_old_format], ids=["other-secret", "old-format"]
)
def test_an_entry_this_server_did_not_sign_is_rejected_and_warned_about_once(
    store: ChunkKVStore, plant, lookup, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.DEBUG, logger="engine.kvstore"):
        for _ in range(2):  # whoever rewrote it once can rewrite it on every request
            plant(store)
            assert lookup(store) is None
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and KEY in warnings[0].getMessage()
    stats = store.stats()
    assert (stats["rejected"], stats["disk_rejected"], stats["corrupt"]) == (2, 2, 0)
    assert_healed(store)


ILL_FITTING = {
    "fewer-tokens": make_entry(0, tokens=3),
    "other-token-ids": make_entry(1),
    "other-layer-count": make_entry(0, layers=2),
    "other-dtype": ChunkKV(CHUNK.keys.half(), CHUNK.values.half(), CHUNK.token_ids),
    "other-kv-heads": ChunkKV(CHUNK.keys[:, :, :1], CHUNK.values[:, :, :1], CHUNK.token_ids),
}


@pytest.mark.parametrize("lookup", LOOKUPS.values(), ids=LOOKUPS.keys())
@pytest.mark.parametrize("wrong", ILL_FITTING.values(), ids=ILL_FITTING.keys())
def test_a_signed_entry_that_does_not_fit_its_chunk_is_rejected_from_disk(
    store: ChunkKVStore, wrong: ChunkKV, lookup, caplog: pytest.LogCaptureFixture
) -> None:
    store.backing[0].put(KEY, wrong)  # intact and signed, but not this chunk's KV
    with caplog.at_level(logging.WARNING, logger="engine.kvstore"):
        assert lookup(store) is None
    assert "served as a miss" in caplog.text
    stats = store.stats()
    assert (stats["rejected"], stats["misses"], stats["corrupt"]) == (1, 1, 0)
    assert_healed(store)


@pytest.mark.parametrize("lookup", LOOKUPS.values(), ids=LOOKUPS.keys())
@pytest.mark.parametrize("wrong", ILL_FITTING.values(), ids=ILL_FITTING.keys())
def test_an_entry_in_memory_that_does_not_fit_its_chunk_is_rejected_everywhere(
    store: ChunkKVStore, wrong: ChunkKV, lookup
) -> None:
    store.put(KEY, wrong)  # in memory, and queued for the disk
    assert lookup(store) is None
    store.flush()
    assert store.stats()["rejected"] == 1
    assert_healed(store)


GARBAGE = {
    "truncated": lambda data: data[: len(data) // 2],
    "garbage-header": lambda data: data[:6] + bytes(range(256)) * 4,  # magic, version kept
    "no-magic": lambda data: b"\x80\x04pickle" + data[10:],
    "empty": lambda data: b"",
}


@pytest.mark.parametrize("lookup", LOOKUPS.values(), ids=LOOKUPS.keys())
@pytest.mark.parametrize("damage", GARBAGE.values(), ids=GARBAGE.keys())
def test_a_damaged_file_is_a_counted_miss(store: ChunkKVStore, damage, lookup) -> None:
    store.backing[0].put(KEY, CHUNK)
    entry_file(store).write_bytes(damage(entry_file(store).read_bytes()))
    assert lookup(store) is None
    assert store.stats()["corrupt"] == 1
    assert_healed(store)
