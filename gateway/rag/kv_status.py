"""Document status follows the chunk store.

With every blended request the engine's worker reports the store keys of the chunks it now
holds (hits and newly stored misses) and of those that left the store through eviction since
its last report; between requests it reports the evictions a slower tier makes as it writes
entries in the background. This collects them as they arrive and applies them to the library in
batches, off the event loop: a document is ``cached`` only while every one of its chunks is in
the store, and turns ``cached`` again when a request stores its missing chunks back. What cannot
be written while the library's database is down is kept and written once it is back (logged
once).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable

from retriever import LibraryStore, LibraryUnavailable, OutageLog

log = logging.getLogger(__name__)
APPLY_EVERY_SECONDS = 1.0


class KVStatusFollower:
    def __init__(self, store: LibraryStore, interval: float = APPLY_EVERY_SECONDS) -> None:
        self.store = store
        self.interval = interval
        self._present: set[str] = set()
        self._evicted: set[str] = set()
        self._task: asyncio.Task[None] | None = None
        self._outage = OutageLog(log, "recording which chunks are in the chunk store")

    def observe(self, present: Iterable[str]) -> None:
        """Engine listener (event loop): chunks a finished request reported held in the store."""
        self._note(present, ())

    def evicted(self, keys: Iterable[str]) -> None:
        """Engine listener (event loop): chunks the store reported evicted, after any request
        reported them present (as the worker took them after storing that request's chunks)."""
        self._note((), keys)

    def _note(self, present: Iterable[str], evicted: Iterable[str]) -> None:
        for key in present:
            self._evicted.discard(key)
            self._present.add(key)
        for key in evicted:  # taken after the request's chunks were stored
            self._present.discard(key)
            self._evicted.add(key)

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="kv-status")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
        await self.apply()

    async def apply(self) -> None:
        """Write what was observed since the last call to the library."""
        if not (self._present or self._evicted):
            return
        present, evicted = self._present, self._evicted
        self._present, self._evicted = set(), set()
        try:
            await asyncio.to_thread(self.store.apply_kv_presence, present, evicted)
        except LibraryUnavailable as error:
            self._outage.failed(error)
            self._keep_unwritten(present, evicted)
            return
        except Exception:
            log.exception("could not record which chunks are in the chunk store")
            return
        self._outage.succeeded()

    def _keep_unwritten(self, present: set[str], evicted: set[str]) -> None:
        """Put back what failed to be written, under what was observed since (which is newer)."""
        newer_present, newer_evicted = self._present, self._evicted
        self._present, self._evicted = set(), set()
        self._note(present, evicted)
        self._note(newer_present, newer_evicted)

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self.interval)
            await self.apply()
