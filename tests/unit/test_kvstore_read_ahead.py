"""A blend's chunk streams read ahead on one thread: layer by layer across chunks, a bounded
distance ahead of the reader, each stream's own error raised only by that stream, and every
source finished (promoted) as soon as its last layer is read."""

from __future__ import annotations

import gc
import threading
import time
from collections.abc import Callable, Generator

import pytest
import torch

from engine.kvstore.base import LayerKV, LayerStream
from engine.kvstore.codec import CorruptEntry
from engine.kvstore.entry import ChunkKV
from engine.kvstore.prefetch import read_ahead
from tests.unit.kv_entries import make_entry

LAYERS = 6


class Source:
    """A stream over `entry` that logs each read as (name, layer) and notes its end and close."""

    def __init__(self, name: str, entry: ChunkKV, log: list[tuple[str, int]], fail_at: int = -1):
        self.name, self.entry, self.log, self.fail_at = name, entry, log, fail_at
        self.finished = self.closed = False
        self.stream = LayerStream(entry, self._layers(), on_close=self._close)

    def _layers(self) -> Generator[LayerKV, None, None]:
        for index in range(self.entry.num_layers):
            if index == self.fail_at:
                raise CorruptEntry(f"{self.name} layer {index} is damaged")
            self.log.append((self.name, index))
            yield index, *self.entry.layer(index)
        self.finished = True

    def _close(self) -> None:
        self.closed = True


def sources(count: int, log: list[tuple[str, int]], **failing: int) -> list[Source]:
    names = [f"chunk{index}" for index in range(count)]
    return [
        Source(name, make_entry(index, layers=LAYERS), log, failing.get(name, -1))
        for index, name in enumerate(names)
    ]


def eventually(condition: Callable[[], bool]) -> bool:
    deadline = time.monotonic() + 5
    while not condition() and time.monotonic() < deadline:
        time.sleep(0.005)
    return condition()


def test_every_stream_yields_its_sources_layers_and_reading_goes_layer_by_layer() -> None:
    log: list[tuple[str, int]] = []
    chunks = sources(3, log)
    streams = read_ahead([chunk.stream for chunk in chunks])
    for layer in range(LAYERS):
        for chunk, stream in zip(chunks, streams, strict=True):
            index, keys, values = next(stream)
            assert index == layer
            assert torch.equal(keys, chunk.entry.keys[layer])
            assert torch.equal(values, chunk.entry.values[layer])
    assert [layer for _, layer in log] == sorted(layer for _, layer in log)
    assert all(
        stream.token_ids == chunk.entry.token_ids
        for chunk, stream in zip(chunks, streams, strict=True)
    )


def test_one_thread_reads_all_sources_and_stays_a_bounded_distance_ahead() -> None:
    log: list[tuple[str, int]] = []
    before = threading.active_count()
    streams = read_ahead([chunk.stream for chunk in sources(8, log)], depth=2)
    assert threading.active_count() == before + 1
    assert eventually(lambda: len(log) == 2 * 8)
    time.sleep(0.05)
    assert len(log) == 2 * 8  # nobody asked: two layers of each, no more
    next(streams[0])
    next(streams[0])
    assert eventually(lambda: len(log) == 3 * 8)
    for stream in streams:
        stream.close()
    assert eventually(lambda: threading.active_count() == before)


def test_reading_one_chunk_far_ahead_of_the_others_does_not_block_it() -> None:
    """The question probe reads its first layers chunk by chunk, before the blend reads layer
    by layer: the read-ahead follows the furthest reader."""
    log: list[tuple[str, int]] = []
    streams = read_ahead([chunk.stream for chunk in sources(3, log)], depth=1)
    for stream in streams:
        assert [next(stream)[0] for _ in range(4)] == [0, 1, 2, 3]
    for stream in streams:
        assert [index for index, _, _ in stream] == [4, 5]


def test_a_damaged_source_fails_only_its_own_stream_where_its_bad_layer_would_be() -> None:
    log: list[tuple[str, int]] = []
    chunks = sources(3, log, chunk1=2)
    streams = read_ahead([chunk.stream for chunk in chunks])
    assert [next(streams[1])[0] for _ in range(2)] == [0, 1]
    with pytest.raises(CorruptEntry, match="chunk1 layer 2"):
        next(streams[1])
    assert [index for index, _, _ in streams[0]] == list(range(LAYERS))
    assert [index for index, _, _ in streams[2]] == list(range(LAYERS))
    assert ("chunk1", 3) not in log and chunks[1].closed


def test_a_source_is_finished_when_its_last_layer_is_taken_without_asking_past_it() -> None:
    chunks = sources(2, [])
    streams = read_ahead([chunk.stream for chunk in chunks])
    for stream in streams:
        assert len([next(stream) for _ in range(LAYERS)]) == LAYERS
    assert all(chunk.finished for chunk in chunks)
    for stream in streams:
        stream.close()
    assert eventually(lambda: all(chunk.closed for chunk in chunks))


def test_dropping_the_streams_stops_the_thread_and_closes_unfinished_sources() -> None:
    before = threading.active_count()
    chunks = sources(2, [])
    streams = read_ahead([chunk.stream for chunk in chunks])
    next(streams[0])
    del streams
    gc.collect()
    assert eventually(lambda: threading.active_count() == before)
    assert all(chunk.closed and not chunk.finished for chunk in chunks)


def test_no_sources_start_no_thread_and_depth_must_be_positive() -> None:
    before = threading.active_count()
    assert read_ahead([]) == []
    assert threading.active_count() == before
    with pytest.raises(ValueError, match="depth"):
        read_ahead([source.stream for source in sources(1, [])], depth=0)
