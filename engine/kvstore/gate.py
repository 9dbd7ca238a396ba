"""The chunk-KV store's check of what it is about to serve, against the use it is served for.

Tiers verify bytes (MACs, layout); only the caller knows which chunk and model an entry is for.
An intact entry for the wrong tokens or geometry crashes the engine or changes the answer, and a
reader that raises anything but `CorruptEntry` escapes the caller's handling. The gate turns
every such case into a miss, so a lookup never raises because of what is stored.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Generator

import torch

from engine.kvstore.base import LayerKV, LayerStream
from engine.kvstore.codec import CorruptEntry
from engine.kvstore.counters import Counters, RefusalLog
from engine.kvstore.entry import ChunkKV
from engine.kvstore.expect import EntryExpectation
from engine.kvstore.keys import ChunkKey

logger = logging.getLogger(__name__)


class EntryGate:
    """Passes an entry only if it matches the caller's `EntryExpectation` and reads cleanly.

    A refused entry is counted ("rejected" when it does not match its use, "read_errors" when
    reading it raised), logged (at warning once per key) and handed to `discard`, which deletes
    it from every tier. A stream's `promote` receives its entry once it was read whole and checked.
    Methods run on the caller's thread and may be called from several threads at once.
    """

    def __init__(self, discard: Callable[[ChunkKey], object]) -> None:
        self.counters = Counters("rejected", "read_errors")
        self._discard = discard
        self._refusals = RefusalLog(logger)

    def refuse(self, key: ChunkKey, counter: str, reason: str) -> None:
        """Count, log and discard an entry that must not be served."""
        self.counters.add(counter)
        self._refusals.refused(key, "deleting chunk KV %s, served as a miss: %s", key, reason)
        try:
            self._discard(key)
        except Exception:
            logger.exception("could not delete the refused chunk KV %s", key)

    def entry(
        self, key: ChunkKey, entry: ChunkKV | None, expected: EntryExpectation
    ) -> ChunkKV | None:
        """`entry` if it matches `expected`; otherwise refuse it and return None."""
        problem = None if entry is None else expected.mismatch(entry)
        if problem is None:
            return entry
        self.refuse(key, "rejected", problem)
        return None

    def read(self, key: ChunkKey, read: Callable[[], ChunkKV | None]) -> ChunkKV | None:
        """What `read()` returns, or None (refused) if it raises."""
        try:
            return read()
        except Exception as error:
            self.refuse(key, "read_errors", f"reading it failed: {error!r}")
            return None

    def open(
        self,
        key: ChunkKey,
        load: Callable[[], LayerStream | None],
        expected: EntryExpectation,
        promote: Callable[[ChunkKV], None],
    ) -> LayerStream | None:
        """The stream `load()` opens, checked; None on a miss or a refusal.

        The stream's header is checked now, each layer as it is read (on the thread reading it:
        see `prefetch.read_ahead`), and `promote` receives the entry once the stream was read to
        its end. Iterating the returned stream raises only `CorruptEntry`, after the entry was
        refused.
        """
        source: LayerStream | None = None
        try:
            source = load()
            if source is None:
                return None
            problem, counter = expected.mismatch(source), "rejected"
            if problem is None:
                checked = self._checked_layers(key, source, expected, promote)
                return LayerStream(source, checked, source.close)
        except Exception as error:
            problem, counter = f"opening it failed: {error!r}", "read_errors"
        if source is not None:
            source.close()
        self.refuse(key, counter, problem)
        return None

    def _checked_layers(
        self,
        key: ChunkKey,
        stream: LayerStream,
        expected: EntryExpectation,
        promote: Callable[[ChunkKV], None],
    ) -> Generator[LayerKV, None, None]:
        """Yield `stream`'s layers, each checked; promote the entry once every layer arrived."""
        keys: list[torch.Tensor] = []
        values: list[torch.Tensor] = []
        try:
            for position, (index, k, v) in enumerate(stream):
                problem = expected.layer_mismatch(position, index, k, v)
                if problem is not None:
                    self.refuse(key, "rejected", problem)
                    raise CorruptEntry(problem)
                keys.append(k)
                values.append(v)
                yield index, k, v
            if len(keys) != expected.num_layers:
                problem = f"{len(keys)} layers arrived, expected {expected.num_layers}"
                self.refuse(key, "rejected", problem)
                raise CorruptEntry(problem)
            token_ids = list(expected.token_ids)
            promote(ChunkKV(torch.stack(keys), torch.stack(values), token_ids))
        except CorruptEntry:
            raise  # already counted, logged and deleted, here or by the tier that found it
        except Exception as error:
            self.refuse(key, "read_errors", f"reading it failed: {error!r}")
            raise CorruptEntry(f"reading chunk KV {key} failed: {error!r}") from error
        finally:
            stream.close()
