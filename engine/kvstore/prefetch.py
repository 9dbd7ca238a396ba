"""Read-ahead of a blend's chunk streams on one background thread, so loading overlaps compute.

A blend consumes its chunks layer by layer: layer i of every chunk, then layer i+1. One thread
reads them in that order, layer i+1 of every chunk while the caller computes layer i. A thread per
chunk did the same work but cost more than it read: on a 2-core CPU, streaming 16 chunks of 512
tokens from Redis took 0.43 s of CPU with a thread each and 0.27 s with one thread
(`load_tests.bench_read_ahead`), and on a CPU engine that difference is taken from the compute
the load is meant to hide behind.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Generator, Sequence
from contextlib import suppress
from itertools import count

from engine.kvstore.base import LayerKV, LayerStream
from engine.kvstore.codec import CorruptEntry

READ_AHEAD_LAYERS = 2
"""Layers kept read from the furthest one asked for on (that one included): layer i+1 loads
while layer i computes, and little memory is held."""
_END = object()


class _Feed:
    """Rows of layers (row i: layer i of every source) produced on a thread, taken per source."""

    def __init__(self, sources: Sequence[LayerStream], depth: int) -> None:
        self._sources = list(sources)
        self._depth = depth
        self._rows: dict[int, list[object]] = {}
        self._finished = [False] * len(sources)  # a source that ended or failed is not read again
        self._open = set(range(len(sources)))
        self._asked = 0
        self._stopped = False
        self._exhausted = False
        self._failure: CorruptEntry | None = None
        self._ready = threading.Condition()

    def run(self) -> None:
        try:
            for row in count():
                if all(self._finished):
                    return
                with self._ready:
                    self._ready.wait_for(
                        lambda row=row: self._stopped or row < self._asked + self._depth
                    )
                    if self._stopped:
                        return
                items = [self._read(index) for index in range(len(self._sources))]
                with self._ready:
                    self._rows[row] = items
                    self._ready.notify_all()
        except Exception as error:  # not a source's error: those are delivered per source
            self._failure = CorruptEntry(f"reading chunk KV ahead failed: {error!r}")
        finally:
            for source in self._sources:
                source.close()
            with self._ready:
                self._exhausted = True
                self._ready.notify_all()

    def _read(self, index: int) -> object:
        """The next layer of source `index`, _END, or the error reading it raised. After its
        last layer a source is read once more, so it finishes (and is promoted) before the
        caller, who takes exactly its layers, can close it."""
        source = self._sources[index]
        if index not in self._open and not self._finished[index]:  # its reader left early
            self._finished[index] = True
            source.close()
        if self._finished[index]:
            return _END
        try:
            layer = next(source)
            if layer[0] == source.num_layers - 1:
                self._finished[index] = True
                with suppress(CorruptEntry):  # the layer is verified; the source counted this
                    next(source, None)
                source.close()
            return layer
        except StopIteration:
            self._finished[index] = True
            return _END
        except Exception as error:
            self._finished[index] = True
            source.close()
            return error

    def take(self, index: int, row: int) -> object:
        """Source `index`'s item of `row`, waiting for the row to be read."""
        with self._ready:
            if row > self._asked:
                self._asked = row
                self._ready.notify_all()
            self._ready.wait_for(lambda: row in self._rows or self._stopped or self._exhausted)
            if row not in self._rows:
                return _END if self._failure is None else self._failure
            items = self._rows[row]
            item, items[index] = items[index], None
            if all(value is None for value in items):
                del self._rows[row]
            return item

    def release(self, index: int) -> None:
        """Source `index`'s reader is done with it; the thread stops once all are."""
        with self._ready:
            self._open.discard(index)
            for row, items in list(self._rows.items()):
                items[index] = None
                if all(value is None for value in items):
                    del self._rows[row]
            if not self._open:
                self._stopped = True
                self._rows.clear()
                self._ready.notify_all()


def _layers(feed: _Feed, index: int) -> Generator[LayerKV, None, None]:
    try:
        for row in count():
            item = feed.take(index, row)
            if item is _END:
                return
            if isinstance(item, Exception):
                raise item
            yield item  # type: ignore[misc]
    finally:
        feed.release(index)


def read_ahead(sources: Sequence[LayerStream], depth: int = READ_AHEAD_LAYERS) -> list[LayerStream]:
    """Read every source on one background thread, layer i of each before layer i+1 of any,
    up to `depth` layers from the furthest layer any returned stream asked for (that one
    included).

    Returns one stream per source, with its layout, yielding the same layers in the same order;
    a source's error (such as `CorruptEntry`) is raised by its own stream where the failing layer
    would have appeared, and the other streams go on. A source is read to its end as soon as its
    last layer is, so whatever its exhaustion does (a store's promotion) happens on the thread.
    Closing or dropping every returned stream stops the thread, which then closes the sources.
    """
    if depth <= 0:
        raise ValueError(f"depth must be positive, got {depth}")
    if not sources:
        return []
    feed = _Feed(sources, depth)
    streams = []
    for index, source in enumerate(sources):
        stream = LayerStream(source, _layers(feed, index), on_close=lambda i=index: feed.release(i))
        weakref.finalize(stream, feed.release, index)
        streams.append(stream)
    threading.Thread(target=feed.run, name="chunk-kv-read-ahead", daemon=True).start()
    return streams
