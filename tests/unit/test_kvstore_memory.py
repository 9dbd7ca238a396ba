"""Memory tier: LRU order, byte capacity, counters, thread safety."""

import threading

import pytest
import torch

from engine.kvstore.entry import ChunkKV
from engine.kvstore.keys import ChunkKey
from engine.kvstore.memory import MemoryTier, pinned_nbytes
from engine.kvstore.store import ChunkKVStore


def make_entry(seed: int, tokens: int = 4) -> ChunkKV:
    gen = torch.Generator().manual_seed(seed)
    shape = (2, tokens, 2, 8)
    keys = torch.randn(shape, generator=gen).to(torch.bfloat16)
    values = torch.randn(shape, generator=gen).to(torch.bfloat16)
    return ChunkKV(keys, values, list(range(seed, seed + tokens)))


def key_of(entry: ChunkKV) -> ChunkKey:
    return ChunkKey.for_chunk("test-model", entry.token_ids)


ENTRY_BYTES = make_entry(0).nbytes  # 2 layers * 4 tokens * 2 heads * 8 dims * 2 (K, V) * 2 bytes


def test_get_returns_what_was_put_and_counts() -> None:
    tier = MemoryTier(10 * ENTRY_BYTES)
    entry = make_entry(1)
    tier.put(key_of(entry), entry)
    assert tier.get(key_of(entry)) is entry
    assert tier.get(key_of(make_entry(2))) is None
    stats = tier.stats()
    assert (stats["hits"], stats["misses"], stats["entries"]) == (1, 1, 1)
    assert stats["bytes"] == ENTRY_BYTES


def test_least_recently_used_entry_is_evicted_first() -> None:
    tier = MemoryTier(3 * ENTRY_BYTES)
    a, b, c, d = (make_entry(seed) for seed in range(4))
    for entry in (a, b, c):
        tier.put(key_of(entry), entry)
    assert tier.get(key_of(a)) is a  # a becomes the most recently used; b is now the oldest
    tier.put(key_of(d), d)
    assert not tier.contains(key_of(b))
    assert all(tier.contains(key_of(entry)) for entry in (a, c, d))
    assert tier.keys() == [key_of(c), key_of(a), key_of(d)]
    assert tier.stats()["evictions"] == 1


def test_byte_capacity_is_never_exceeded() -> None:
    capacity = 5 * ENTRY_BYTES
    tier = MemoryTier(capacity)
    for seed in range(40):
        entry = make_entry(seed, tokens=1 + seed % 7)  # sizes from 1/4 to 7/4 of ENTRY_BYTES
        tier.put(key_of(entry), entry)
        stats = tier.stats()
        assert stats["bytes"] <= capacity
        present = tier.keys()
        assert stats["bytes"] == sum(tier.get(key).nbytes for key in present)


def test_a_large_entry_evicts_several_small_ones() -> None:
    tier = MemoryTier(4 * ENTRY_BYTES)
    small = [make_entry(seed) for seed in range(4)]
    for entry in small:
        tier.put(key_of(entry), entry)
    large = make_entry(10, tokens=12)  # three times ENTRY_BYTES
    tier.put(key_of(large), large)
    assert tier.keys() == [key_of(small[3]), key_of(large)]
    assert tier.stats()["evictions"] == 3


def test_an_entry_larger_than_the_capacity_is_declined_without_evicting() -> None:
    tier = MemoryTier(2 * ENTRY_BYTES)
    kept = make_entry(0)
    tier.put(key_of(kept), kept)
    huge = make_entry(1, tokens=12)
    tier.put(key_of(huge), huge)
    assert not tier.contains(key_of(huge))
    assert tier.contains(key_of(kept))
    assert tier.stats()["declined"] == 1


def test_replacing_an_entry_does_not_double_count_bytes() -> None:
    tier = MemoryTier(10 * ENTRY_BYTES)
    entry = make_entry(0)
    tier.put(key_of(entry), entry)
    tier.put(key_of(entry), make_entry(0))
    assert tier.stats()["bytes"] == ENTRY_BYTES and len(tier) == 1


def test_delete() -> None:
    tier = MemoryTier(10 * ENTRY_BYTES)
    entry = make_entry(0)
    tier.put(key_of(entry), entry)
    assert tier.delete(key_of(entry))
    assert not tier.delete(key_of(entry))
    assert tier.get(key_of(entry)) is None and tier.stats()["bytes"] == 0


def test_layer_stream_matches_the_entry() -> None:
    tier = MemoryTier(10 * ENTRY_BYTES)
    entry = make_entry(0)
    tier.put(key_of(entry), entry)
    with tier.load_layers(key_of(entry)) as stream:
        assert stream.token_ids == entry.token_ids and stream.num_layers == 2
        layers = list(stream)
    assert [index for index, _, _ in layers] == [0, 1]
    for index, k, v in layers:
        assert torch.equal(k, entry.keys[index]) and torch.equal(v, entry.values[index])
    assert tier.load_layers(key_of(make_entry(5))) is None


def test_concurrent_puts_and_gets_stay_consistent() -> None:
    capacity = 8 * ENTRY_BYTES
    tier = MemoryTier(capacity)
    entries = [make_entry(seed) for seed in range(20)]
    wrong: list[int] = []

    def worker(offset: int) -> None:
        for step in range(300):
            entry = entries[(offset + step * 7) % len(entries)]
            tier.put(key_of(entry), entry)
            other = entries[(offset + step * 3) % len(entries)]
            found = tier.get(key_of(other))
            if found is not None and found is not other:
                wrong.append(step)

    threads = [threading.Thread(target=worker, args=(offset,)) for offset in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    stats = tier.stats()
    assert not wrong
    assert stats["bytes"] == len(tier.keys()) * ENTRY_BYTES <= capacity
    assert stats["hits"] + stats["misses"] == 8 * 300


@pytest.mark.parametrize("capacity", [0, -1])
def test_capacity_must_be_positive(capacity: int) -> None:
    with pytest.raises(ValueError):
        MemoryTier(capacity)


@pytest.mark.skipif(torch.cuda.is_available(), reason="a CUDA GPU can pin memory")
def test_a_pinned_tier_without_cuda_is_refused_when_made() -> None:
    with pytest.raises(ValueError, match="needs CUDA"):
        MemoryTier(10 * ENTRY_BYTES, pinned=True)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_a_pinned_tier_hands_out_page_locked_layers_a_gpu_copies_in_place() -> None:
    tier = ChunkKVStore.create(10 * ENTRY_BYTES, pinned=True).memory
    entry = make_entry(3)
    tier.put(key_of(entry), entry)
    with tier.load_layers(key_of(entry)) as stream:
        layers = list(stream)
    for index, k, v in layers:
        assert k.is_pinned() and v.is_pinned()
        assert torch.equal(k, entry.keys[index]) and torch.equal(v, entry.values[index])
    pinned = ChunkKV(entry.keys.pin_memory(), entry.values.pin_memory(), [9, 8, 7, 6])
    tier.put(key_of(pinned), pinned)
    assert tier.get(key_of(pinned)) is pinned  # pinned already: kept, not copied again
    odd = make_entry(4, tokens=5)
    tier.put(key_of(odd), odd)
    assert (
        tier.stats()["bytes"] == 2 * ENTRY_BYTES + pinned_nbytes(odd) > 2 * ENTRY_BYTES + odd.nbytes
    )


def test_a_pinned_entry_is_charged_its_power_of_two_blocks() -> None:
    exact = make_entry(0)  # 256 bytes of keys, 256 of values
    assert pinned_nbytes(exact) == exact.nbytes == 512
    odd = make_entry(1, tokens=5)  # 320 bytes each, in blocks of 512
    assert pinned_nbytes(odd) == 2 * 512
