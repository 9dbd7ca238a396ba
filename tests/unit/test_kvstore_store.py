"""ChunkKVStore: tier order, promotion, asynchronous writes, read-ahead, concurrency."""

import threading
import time
from pathlib import Path

import pytest
import torch

from engine.kvstore.codec import CorruptEntry
from engine.kvstore.disk import DiskTier
from engine.kvstore.entry import ChunkKV
from engine.kvstore.keys import ChunkKey
from engine.kvstore.memory import MemoryTier
from engine.kvstore.prefetch import read_ahead
from engine.kvstore.store import ChunkKVStore
from tests.unit.kv_entries import SECRET, expect, key_of, make_entry, same

ENTRY_BYTES = make_entry(0).nbytes


class BlockingTier(MemoryTier):
    """A backing tier whose writes wait until the test releases them."""

    def __init__(self) -> None:
        super().__init__(1 << 30, name="slow")
        self.writing = threading.Event()
        self.release = threading.Event()

    def put(self, key: ChunkKey, entry: ChunkKV) -> None:
        self.writing.set()
        assert self.release.wait(timeout=10)
        super().put(key, entry)


class FailingTier(MemoryTier):
    def put(self, key: ChunkKey, entry: ChunkKV) -> None:
        raise OSError("disk full")


@pytest.fixture
def store(tmp_path: Path):
    with ChunkKVStore.create(100 * ENTRY_BYTES, tmp_path / "kv", secret=SECRET) as store:
        yield store


def test_memory_hit_without_touching_disk(store: ChunkKVStore) -> None:
    entry = make_entry(0)
    store.put(key_of(entry), entry)
    assert store.get(key_of(entry), expect(entry)) is entry
    stats = store.stats()
    assert stats["memory_hits"] == 1 and stats["disk_hits"] == 0 and stats["misses"] == 0


def test_async_writes_appear_on_disk_after_flush(store: ChunkKVStore, tmp_path: Path) -> None:
    entries = [make_entry(seed) for seed in range(5)]
    for entry in entries:
        store.put(key_of(entry), entry)
    store.flush()
    assert store.stats()["pending_writes"] == 0
    reopened = DiskTier(tmp_path / "kv", SECRET)
    assert all(same(reopened.get(key_of(entry)), entry) for entry in entries)


def test_disk_hits_are_promoted_into_memory(store: ChunkKVStore, tmp_path: Path) -> None:
    entry = make_entry(0)
    store.put(key_of(entry), entry)
    store.close()
    with ChunkKVStore.create(100 * ENTRY_BYTES, tmp_path / "kv", secret=SECRET) as restarted:
        assert same(restarted.get(key_of(entry), expect(entry)), entry)
        assert restarted.memory.contains(key_of(entry))
        assert same(restarted.get(key_of(entry), expect(entry)), entry)
        stats = restarted.stats()
    assert (stats["disk_hits"], stats["memory_hits"], stats["misses"]) == (1, 1, 0)
    assert stats["memory_bytes"] == ENTRY_BYTES and stats["disk_bytes"] > ENTRY_BYTES


def test_a_miss_everywhere_is_counted(store: ChunkKVStore) -> None:
    assert store.get(key_of(make_entry(0)), expect(make_entry(0))) is None
    assert store.open_layers(key_of(make_entry(0)), expect(make_entry(0))) is None
    assert not store.contains(key_of(make_entry(0)))
    assert store.stats()["misses"] == 2


def test_a_full_write_queue_drops_instead_of_blocking() -> None:
    slow = BlockingTier()
    store = ChunkKVStore(MemoryTier(100 * ENTRY_BYTES), slow, write_queue_size=1)
    first, queued, dropped = make_entry(0), make_entry(1), make_entry(2)
    store.put(key_of(first), first)
    assert slow.writing.wait(timeout=10)  # the writer is now stuck on the first entry
    started = time.monotonic()
    store.put(key_of(queued), queued)
    store.put(key_of(dropped), dropped)
    assert time.monotonic() - started < 1.0
    assert store.stats()["dropped_writes"] == 1
    assert store.get(key_of(dropped), expect(dropped)) is dropped  # still served from memory
    slow.release.set()
    store.close()
    assert slow.contains(key_of(first)) and slow.contains(key_of(queued))
    assert not slow.contains(key_of(dropped))


def test_a_dropped_rewrite_keeps_the_earlier_queued_write() -> None:
    slow = BlockingTier()
    store = ChunkKVStore(MemoryTier(100 * ENTRY_BYTES), slow, write_queue_size=1)
    blocker, entry = make_entry(0), make_entry(1)
    store.put(key_of(blocker), blocker)
    assert slow.writing.wait(timeout=10)
    store.put(key_of(entry), entry)  # queued
    store.put(key_of(entry), entry)  # queue full: dropped
    assert store.stats()["dropped_writes"] == 1
    slow.release.set()
    store.close()
    assert slow.contains(key_of(entry))


def test_entries_waiting_for_their_write_are_still_found() -> None:
    slow = BlockingTier()
    store = ChunkKVStore(MemoryTier(ENTRY_BYTES), slow)
    first, second = make_entry(0), make_entry(1)
    store.put(key_of(first), first)
    store.put(key_of(second), second)  # evicts `first` from memory before it reaches `slow`
    assert not store.memory.contains(key_of(first))
    assert store.get(key_of(first), expect(first)) is first
    assert store.stats()["pending_hits"] == 1
    slow.release.set()
    store.close()


def test_delete_removes_from_every_tier(store: ChunkKVStore) -> None:
    entry = make_entry(0)
    store.put(key_of(entry), entry)
    store.flush()
    assert store.memory.contains(key_of(entry)) and store.backing[0].contains(key_of(entry))
    assert store.delete(key_of(entry))
    assert not store.memory.contains(key_of(entry)) and not store.backing[0].contains(key_of(entry))
    assert store.get(key_of(entry), expect(entry)) is None
    assert not store.delete(key_of(entry))


def test_delete_cancels_a_write_still_in_the_queue() -> None:
    slow = BlockingTier()
    store = ChunkKVStore(MemoryTier(100 * ENTRY_BYTES), slow)
    first, second = make_entry(0), make_entry(1)
    store.put(key_of(first), first)
    assert slow.writing.wait(timeout=10)
    store.put(key_of(second), second)
    deleted = threading.Thread(target=store.delete, args=(key_of(second),))
    deleted.start()
    slow.release.set()
    deleted.join()
    store.close()
    assert not slow.contains(key_of(second)) and not store.memory.contains(key_of(second))


def test_prefetched_layers_match_get_and_are_promoted(store: ChunkKVStore, tmp_path: Path) -> None:
    entry = make_entry(0, layers=6)
    store.put(key_of(entry), entry)
    store.close()
    with ChunkKVStore.create(100 * ENTRY_BYTES, tmp_path / "kv", secret=SECRET) as again:
        stream = again.open_layers(key_of(entry), expect(entry))
        assert stream is not None and stream.num_layers == 6
        assert stream.token_ids == entry.token_ids
        layers = list(stream)
        assert [index for index, _, _ in layers] == list(range(6))
        for index, k, v in layers:
            assert torch.equal(k, entry.keys[index]) and torch.equal(v, entry.values[index])
        assert again.stats()["disk_hits"] == 1
        assert same(again.get(key_of(entry), expect(entry)), entry)
        assert again.stats()["memory_hits"] == 1  # promoted once the stream was consumed


def test_a_stream_read_layer_by_layer_as_a_blend_does_is_promoted(
    store: ChunkKVStore, tmp_path: Path
) -> None:
    entry = make_entry(0, layers=6)
    store.put(key_of(entry), entry)
    store.close()
    with ChunkKVStore.create(100 * ENTRY_BYTES, tmp_path / "kv", secret=SECRET) as again:
        opened = again.open_layers(key_of(entry), expect(entry))
        assert opened is not None
        [stream] = read_ahead([opened])
        taken = [next(stream) for _ in range(stream.num_layers)]  # never asks past the last
        assert [index for index, _, _ in taken] == list(range(6))
        deadline = time.monotonic() + 5
        while not again.memory.contains(key_of(entry)) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert same(again.memory.get(key_of(entry)), entry)


def test_prefetch_from_memory_yields_the_cached_layers(store: ChunkKVStore) -> None:
    entry = make_entry(0)
    store.put(key_of(entry), entry)
    layers = list(store.open_layers(key_of(entry), expect(entry)))
    assert all(torch.equal(k, entry.keys[i]) for i, k, _ in layers) and len(layers) == 3


def test_prefetch_reports_a_damaged_layer_and_counts_it(store: ChunkKVStore) -> None:
    entry = make_entry(0, layers=4)
    store.put(key_of(entry), entry)
    store.flush()
    store.memory.delete(key_of(entry))
    path = store.backing[0].directory / f"{key_of(entry)}.kv"
    data = bytearray(path.read_bytes())
    data[-2] ^= 0x10
    path.write_bytes(bytes(data))
    stream = store.open_layers(key_of(entry), expect(entry))
    assert [next(stream)[0] for _ in range(3)] == [0, 1, 2]
    with pytest.raises(CorruptEntry):
        next(stream)
    assert store.stats()["corrupt"] == 1
    assert store.get(key_of(entry), expect(entry)) is None


def test_an_abandoned_read_ahead_stops_its_reader(store: ChunkKVStore) -> None:
    entry = make_entry(0, layers=8)
    store.put(key_of(entry), entry)
    store.flush()
    store.memory.delete(key_of(entry))
    before = threading.active_count()
    [stream] = read_ahead([store.open_layers(key_of(entry), expect(entry))])
    next(stream)
    stream.close()
    deadline = time.monotonic() + 5
    while threading.active_count() > before and time.monotonic() < deadline:
        time.sleep(0.01)
    assert threading.active_count() == before
    assert not store.memory.contains(key_of(entry))  # a partial read is not promoted


def test_failed_backing_writes_are_counted_and_serving_continues() -> None:
    store = ChunkKVStore(MemoryTier(100 * ENTRY_BYTES), FailingTier(1 << 20, name="broken"))
    entry = make_entry(0)
    store.put(key_of(entry), entry)
    store.flush()
    assert store.stats()["write_errors"] == 1
    assert store.get(key_of(entry), expect(entry)) is entry
    store.close()


def test_put_after_close_is_refused(store: ChunkKVStore) -> None:
    store.close()
    with pytest.raises(RuntimeError):
        store.put(key_of(make_entry(0)), make_entry(0))


def test_concurrent_puts_and_gets_stay_consistent(tmp_path: Path) -> None:
    entries = [make_entry(seed) for seed in range(24)]
    store = ChunkKVStore.create(
        6 * ENTRY_BYTES, tmp_path / "kv", secret=SECRET, write_queue_size=10_000
    )
    wrong: list[str] = []

    def worker(offset: int) -> None:
        for step in range(60):
            entry = entries[(offset + 5 * step) % len(entries)]
            store.put(key_of(entry), entry)
            wanted = entries[(offset + 3 * step) % len(entries)]
            found = store.get(key_of(wanted), expect(wanted))
            if found is not None and not same(found, wanted):
                wrong.append(key_of(wanted))
            if step % 10 == 0:
                stream = store.open_layers(key_of(wanted), expect(wanted))
                if stream is not None and any(
                    not torch.equal(k, wanted.keys[i]) for i, k, _ in stream
                ):
                    wrong.append(key_of(wanted))

    threads = [threading.Thread(target=worker, args=(offset,)) for offset in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    store.flush()
    assert not wrong
    assert all(same(store.get(key_of(entry), expect(entry)), entry) for entry in entries)
    stats = store.stats()
    assert stats["dropped_writes"] == stats["write_errors"] == stats["corrupt"] == 0
    assert stats["memory_bytes"] <= 6 * ENTRY_BYTES
    assert stats["disk_entries"] == len(entries)
    store.close()


def test_keys_evicted_from_every_tier_are_reported_once_as_lost(tmp_path: Path) -> None:
    first, second, third = (make_entry(seed) for seed in range(3))
    memory_only = ChunkKVStore(MemoryTier(2 * first.nbytes))
    for entry in (first, second, third):
        memory_only.put(key_of(entry), entry)
    assert memory_only.take_lost_keys() == [key_of(first)]
    assert memory_only.take_lost_keys() == []
    memory_only.delete(key_of(second))
    assert memory_only.take_lost_keys() == []  # deleted on purpose: not a loss


def test_an_entry_evicted_from_memory_but_kept_on_disk_is_not_lost(tmp_path: Path) -> None:
    first, second = make_entry(0), make_entry(1)
    disk = DiskTier(tmp_path, SECRET)
    with ChunkKVStore(MemoryTier(first.nbytes), disk) as store:
        store.put(key_of(first), first)
        store.put(key_of(second), second)
        store.flush()
        assert store.take_lost_keys() == []
        assert store.contains(key_of(first))


def test_a_backing_write_that_evicts_calls_back_once_the_loss_can_be_taken(tmp_path: Path) -> None:
    """A slower tier evicts as its writer stores a newer entry, after the put that queued it has
    returned: the callback, on the writer's thread, lets the owner report the loss at once."""
    first, second = make_entry(0), make_entry(1)
    disk = DiskTier(tmp_path, SECRET, capacity_bytes=int(1.5 * first.nbytes))
    calls: list[tuple[str, list[ChunkKey]]] = []
    with ChunkKVStore(MemoryTier(first.nbytes // 2), disk) as store:
        store.after_backing_write(
            lambda: calls.append((threading.current_thread().name, store.take_lost_keys()))
        )
        store.put(key_of(first), first)
        store.flush()
        store.put(key_of(second), second)
        store.flush()
    assert [lost for _, lost in calls] == [[], [key_of(first)]]
    assert all(thread == "chunk-kv-writer-disk" for thread, _ in calls)


def test_a_failing_after_write_callback_stops_no_write(tmp_path: Path) -> None:
    entries = [make_entry(seed) for seed in range(3)]

    def broken() -> None:
        raise RuntimeError("listener bug")

    with ChunkKVStore(MemoryTier(1), DiskTier(tmp_path, SECRET)) as store:
        store.after_backing_write(broken)
        for entry in entries:
            store.put(key_of(entry), entry)
        store.flush()
        assert store.stats()["disk_entries"] == len(entries)
        assert store.stats()["write_errors"] == 0
