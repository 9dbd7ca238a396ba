"""Disk tier: atomic checksummed files, restarts, corruption handling, LRU by mtime."""

import logging
import os
from pathlib import Path

import pytest
import torch

from engine.kvstore.codec import CorruptEntry
from engine.kvstore.disk import DiskTier
from tests.unit.kv_entries import SECRET, key_of, make_entry, same


def flip_byte(path: Path, offset: int) -> None:
    data = bytearray(path.read_bytes())
    data[offset] ^= 0x40
    path.write_bytes(bytes(data))


FILE_BYTES = make_entry(0).encoded_nbytes()


def test_put_then_get_round_trips_through_one_file(tmp_path: Path) -> None:
    tier = DiskTier(tmp_path, SECRET)
    entry = make_entry(1)
    tier.put(key_of(entry), entry)
    assert [p.name for p in tmp_path.iterdir()] == [f"{key_of(entry)}.kv"]
    assert same(tier.get(key_of(entry)), entry)
    assert tier.get(key_of(make_entry(2))) is None
    stats = tier.stats()
    assert (stats["hits"], stats["misses"], stats["entries"]) == (1, 1, 1)
    assert stats["bytes"] == FILE_BYTES


def test_entries_survive_a_new_instance_on_the_same_directory(tmp_path: Path) -> None:
    entries = [make_entry(seed) for seed in range(3)]
    first = DiskTier(tmp_path, SECRET)
    for entry in entries:
        first.put(key_of(entry), entry)
    second = DiskTier(tmp_path, SECRET)
    assert sorted(second.keys()) == sorted(key_of(e) for e in entries)
    assert len(second) == 3 and second.stats()["bytes"] == 3 * FILE_BYTES
    assert all(same(second.get(key_of(e)), e) for e in entries)


@pytest.mark.parametrize(
    "damage",
    [
        lambda path: flip_byte(path, path.stat().st_size // 2),
        lambda path: flip_byte(path, 40),  # inside the token ids
        lambda path: os.truncate(path, path.stat().st_size - 7),
        lambda path: os.truncate(path, 10),
        lambda path: path.write_bytes(b""),
    ],
    ids=["flipped-middle", "flipped-header", "truncated-tail", "truncated-header", "empty"],
)
def test_a_damaged_file_is_a_counted_miss_and_the_next_put_repairs_it(
    tmp_path: Path, damage, caplog: pytest.LogCaptureFixture
) -> None:
    tier = DiskTier(tmp_path, SECRET)
    entry = make_entry(0)
    key = key_of(entry)
    tier.put(key, entry)
    damage(tier.directory / f"{key}.kv")
    with caplog.at_level(logging.WARNING, logger="engine.kvstore.disk"):
        assert tier.get(key) is None
    assert "corrupt" in caplog.text
    assert not tier.contains(key)
    stats = tier.stats()
    assert (stats["corrupt"], stats["misses"], stats["hits"]) == (1, 1, 0)
    assert stats["bytes"] == 0
    tier.put(key, entry)
    assert same(tier.get(key), entry)


def test_layer_stream_returns_the_same_tensors_as_get(tmp_path: Path) -> None:
    tier = DiskTier(tmp_path, SECRET)
    entry = make_entry(0, layers=5)
    tier.put(key_of(entry), entry)
    whole = tier.get(key_of(entry))
    with tier.load_layers(key_of(entry)) as stream:
        assert stream.token_ids == entry.token_ids and stream.num_layers == 5
        layers = list(stream)
    assert [index for index, _, _ in layers] == list(range(5))
    for index, k, v in layers:
        assert torch.equal(k, whole.keys[index]) and torch.equal(v, whole.values[index])
    assert tier.load_layers(key_of(make_entry(9))) is None


def test_a_damaged_last_layer_fails_only_when_reached(tmp_path: Path) -> None:
    tier = DiskTier(tmp_path, SECRET)
    entry = make_entry(0, layers=4)
    key = key_of(entry)
    tier.put(key, entry)
    path = tier.directory / f"{key}.kv"
    flip_byte(path, path.stat().st_size - 3)
    stream = tier.load_layers(key)
    assert stream is not None
    for index in range(3):
        got_index, k, _ = next(stream)
        assert got_index == index and torch.equal(k, entry.keys[index])
    with pytest.raises(CorruptEntry, match="layer 3"):
        next(stream)
    assert not path.exists() and tier.stats()["corrupt"] == 1


def test_an_abandoned_layer_stream_releases_its_file(tmp_path: Path) -> None:
    tier = DiskTier(tmp_path, SECRET)
    entry = make_entry(0)
    tier.put(key_of(entry), entry)
    stream = tier.load_layers(key_of(entry))
    next(stream)
    stream.close()
    unopened = tier.load_layers(key_of(entry))
    unopened.close()
    open_files = os.listdir("/proc/self/fd") if Path("/proc/self/fd").exists() else []
    assert not any(
        os.path.realpath(f"/proc/self/fd/{fd}").startswith(str(tmp_path)) for fd in open_files
    )


def test_capacity_evicts_the_least_recently_read_file(tmp_path: Path) -> None:
    tier = DiskTier(tmp_path, SECRET, capacity_bytes=2 * FILE_BYTES)
    a, b, c = (make_entry(seed) for seed in range(3))
    tier.put(key_of(a), a)
    tier.put(key_of(b), b)
    assert tier.get(key_of(a)) is not None  # b is now the least recently used
    tier.put(key_of(c), c)
    assert sorted(tier.keys()) == sorted([key_of(a), key_of(c)])
    stats = tier.stats()
    assert stats["evictions"] == 1 and stats["bytes"] == 2 * FILE_BYTES


def test_recency_survives_a_restart_through_file_mtimes(tmp_path: Path) -> None:
    entries = [make_entry(seed) for seed in range(3)]
    first = DiskTier(tmp_path, SECRET)
    for age, entry in zip((100, 300, 200), entries, strict=True):
        first.put(key_of(entry), entry)
        stamp = 1_700_000_000 - age
        os.utime(tmp_path / f"{key_of(entry)}.kv", (stamp, stamp))
    second = DiskTier(tmp_path, SECRET, capacity_bytes=2 * FILE_BYTES)  # must drop the oldest now
    assert sorted(second.keys()) == sorted([key_of(entries[0]), key_of(entries[2])])
    newest = make_entry(7)
    second.put(key_of(newest), newest)
    assert sorted(second.keys()) == sorted([key_of(entries[0]), key_of(newest)])


def test_an_entry_larger_than_the_capacity_is_declined(tmp_path: Path) -> None:
    tier = DiskTier(tmp_path, SECRET, capacity_bytes=FILE_BYTES - 1)
    entry = make_entry(0)
    tier.put(key_of(entry), entry)
    assert not tier.contains(key_of(entry)) and tier.stats()["declined"] == 1


def test_leftover_temp_files_and_foreign_files(tmp_path: Path) -> None:
    (tmp_path / ".deadbeef.0123.tmp").write_bytes(b"half a write")
    (tmp_path / "notes.txt").write_text("not an entry")
    (tmp_path / "not-a-key.kv").write_bytes(b"junk")
    tier = DiskTier(tmp_path, SECRET)
    assert not (tmp_path / ".deadbeef.0123.tmp").exists()
    assert (tmp_path / "notes.txt").exists()
    assert len(tier) == 0 and tier.stats()["bytes"] == 0


def test_no_temp_file_is_left_after_puts(tmp_path: Path) -> None:
    tier = DiskTier(tmp_path, SECRET)
    for seed in range(3):
        entry = make_entry(seed)
        tier.put(key_of(entry), entry)
        tier.put(key_of(entry), entry)
    assert sorted(p.suffix for p in tmp_path.iterdir()) == [".kv"] * 3


def test_delete(tmp_path: Path) -> None:
    tier = DiskTier(tmp_path, SECRET)
    entry = make_entry(0)
    tier.put(key_of(entry), entry)
    assert tier.delete(key_of(entry))
    assert not tier.delete(key_of(entry))
    assert tier.get(key_of(entry)) is None and tier.stats()["bytes"] == 0
    assert list(tmp_path.iterdir()) == []
