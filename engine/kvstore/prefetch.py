"""Read-ahead of a layer stream on a background thread, so loading overlaps compute."""

from __future__ import annotations

import queue
import threading
import weakref
from collections.abc import Generator
from typing import cast

from engine.kvstore.base import LayerKV, LayerStream

_END = object()
_OFFER_POLL_S = 0.05


def _offer(buffer: queue.Queue[object], item: object, stop: threading.Event) -> bool:
    """Put `item` into `buffer`, waiting for room; False if the consumer went away first."""
    while not stop.is_set():
        try:
            buffer.put(item, timeout=_OFFER_POLL_S)
            return True
        except queue.Full:
            continue
    return False


def read_ahead(source: LayerStream, depth: int) -> LayerStream:
    """Read `source` on a background thread, at most `depth` layers ahead of the consumer.

    The returned stream has the source's layout and yields the same layers in the same order,
    and re-raises any error of the source (such as `CorruptEntry`) at the point where the failing
    layer would have appeared. Closing the returned stream, or dropping it, stops the reader.
    """
    if depth <= 0:
        raise ValueError(f"depth must be positive, got {depth}")
    buffer: queue.Queue[object] = queue.Queue(maxsize=depth)
    stop = threading.Event()

    def produce() -> None:
        try:
            for layer in source:
                if not _offer(buffer, layer, stop):
                    return
            _offer(buffer, _END, stop)
        except Exception as error:
            _offer(buffer, error, stop)
        finally:
            source.close()

    def consume() -> Generator[LayerKV, None, None]:
        try:
            while (item := buffer.get()) is not _END:
                if isinstance(item, Exception):
                    raise item
                yield cast(LayerKV, item)
        finally:
            stop.set()

    threading.Thread(target=produce, name="chunk-kv-read-ahead", daemon=True).start()
    stream = LayerStream(source, consume(), on_close=stop.set)
    weakref.finalize(stream, stop.set)
    return stream
