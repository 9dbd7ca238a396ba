"""Whatever goes wrong reading a backing entry, the caller sees a miss or one `CorruptEntry`.

The engine catches `CorruptEntry` around a layer stream and nothing else; any other exception in
its step would take it down. A backing tier here is a memory tier whose reads fail the way disks,
remote stores and buggy tiers do.
"""

import struct
import threading
import time
from collections.abc import Callable, Generator

import pytest
import torch

from engine.kvstore.base import LayerKV, LayerStream
from engine.kvstore.codec import CorruptEntry
from engine.kvstore.entry import ChunkKV
from engine.kvstore.keys import ChunkKey
from engine.kvstore.memory import MemoryTier
from engine.kvstore.store import ChunkKVStore
from tests.unit.kv_entries import expect, key_of, make_entry

CHUNK = make_entry(0, layers=3)
KEY = key_of(CHUNK)
Layers = Callable[[ChunkKV], Generator[LayerKV, None, None]]


class FaultyTier(MemoryTier):
    """A backing tier that holds `CHUNK` and streams it through `layers` (or fails to open)."""

    def __init__(self, layers: Layers | None = None, open_error: Exception | None = None) -> None:
        super().__init__(1 << 20, name="faulty")
        self._layers = layers
        self._open_error = open_error
        super().put(KEY, CHUNK)

    def get(self, key: ChunkKey) -> ChunkKV | None:
        if self._open_error is not None:
            raise self._open_error
        return super().get(key)

    def load_layers(self, key: ChunkKey) -> LayerStream | None:
        entry = self.get(key)
        if entry is None or self._layers is None:
            return None if entry is None else LayerStream.from_entry(entry)
        return LayerStream(entry, self._layers(entry))


def failing_at_layer_one(entry: ChunkKV) -> Generator[LayerKV, None, None]:
    yield 0, *entry.layer(0)
    raise OSError(5, "Input/output error")


def wrong_shape_at_layer_one(entry: ChunkKV) -> Generator[LayerKV, None, None]:
    yield 0, *entry.layer(0)
    k, v = entry.layer(1)
    yield 1, k[:2], v[:2]


def out_of_order(entry: ChunkKV) -> Generator[LayerKV, None, None]:
    yield 1, *entry.layer(1)


def ending_early(entry: ChunkKV) -> Generator[LayerKV, None, None]:
    for index in range(entry.num_layers - 1):
        yield index, *entry.layer(index)


STREAMS = {
    "io-error": (failing_at_layer_one, "read_errors"),
    "wrong-shape": (wrong_shape_at_layer_one, "rejected"),
    "out-of-order": (out_of_order, "rejected"),
    "too-few-layers": (ending_early, "rejected"),
}


@pytest.mark.parametrize(("layers", "counter"), STREAMS.values(), ids=STREAMS.keys())
def test_a_failing_layer_stream_raises_only_corrupt_entry(layers: Layers, counter: str) -> None:
    backing = FaultyTier(layers)
    with ChunkKVStore(MemoryTier(1 << 20), backing) as store:
        stream = store.open_layers(KEY, expect(CHUNK))
        assert stream is not None
        with pytest.raises(CorruptEntry):
            for index, k, _ in stream:
                assert torch.equal(k, CHUNK.keys[index])
        assert store.stats()[counter] == 1
        assert not backing.contains(KEY) and not store.memory.contains(KEY)  # never promoted


OPEN_ERRORS = {
    "oserror": OSError(13, "Permission denied"),
    "struct": struct.error("unpack requires a buffer of 32 bytes"),
    "runtime": RuntimeError("shape is invalid for input"),
    "memory": MemoryError(),
}


@pytest.mark.parametrize("error", OPEN_ERRORS.values(), ids=OPEN_ERRORS.keys())
def test_a_backing_tier_that_raises_on_open_is_a_counted_miss(error: Exception) -> None:
    with ChunkKVStore(MemoryTier(1 << 20), FaultyTier(open_error=error)) as store:
        assert store.open_layers(KEY, expect(CHUNK)) is None
        assert store.get(KEY, expect(CHUNK)) is None
        stats = store.stats()
    assert (stats["read_errors"], stats["misses"]) == (2, 2)


def test_a_clean_stream_from_the_backing_tier_is_promoted() -> None:
    with ChunkKVStore(MemoryTier(1 << 20), FaultyTier()) as store:
        stream = store.open_layers(KEY, expect(CHUNK))
        assert (stream.num_layers, stream.num_kv_heads, stream.head_dim) == (3, 2, 8)
        assert [index for index, _, _ in stream] == [0, 1, 2]
        assert store.memory.contains(KEY)
        assert store.stats()["rejected"] == store.stats()["read_errors"] == 0


def test_closing_an_unread_stream_stops_its_reader() -> None:
    with ChunkKVStore(MemoryTier(1 << 20), FaultyTier()) as store:
        before = threading.active_count()
        stream = store.open_layers(KEY, expect(CHUNK))
        stream.close()  # still referenced: the reader must stop because of the close
        deadline = time.monotonic() + 5
        while threading.active_count() > before and time.monotonic() < deadline:
            time.sleep(0.01)
        assert threading.active_count() == before
        assert not store.memory.contains(KEY)
