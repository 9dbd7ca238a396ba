"""Precompute the KV of newly ingested chunks in the background, one at a time.

One request at a time keeps ingestion from starving serving: each precompute is a short
prefill that vLLM batches with live requests. It waits while documents are being ingested, and
`background_quiet_s` after: embedding them is the ingest's own work, on the same CPUs, and a
document is acknowledged once stored and searchable, its chunks' KV computed afterwards.
Work survives restarts: pending chunks are read from the document store, so a restart resumes
where the last run stopped. With a library shared by replicas each chunk is claimed by one of
them (`claim_pending_chunks`), and every replica looks for unclaimed work now and then, so chunks
a crashed replica had claimed get done too. While the library's database is down the loop logs
once and retries.

With neighbour contexts (`gateway.rag.chunk_context`) each chunk is computed behind its nearest
chunks, and a chunk whose neighbours changed comes back stale (`kv_cached` already true): it is
computed again and replaces its stored KV; its document stays cached throughout.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable

from engine.chunk_cache import ChunkCache
from engine.contract import BlendStats
from gateway.http.metrics import CHUNK_CONTEXT_REFRESHES, PRECOMPUTED_CHUNKS
from gateway.rag.chunk_context import NeighbourContext
from retriever import (
    DEFAULT_PROJECT,
    EVERY_PROJECT,
    ChunkRow,
    Library,
    LibraryStore,
    LibraryUnavailable,
    OutageLog,
    Tenant,
)

log = logging.getLogger(__name__)
BATCH = 1
"""Chunks claimed at a time: one, so a claim's lease covers a single precompute however busy the
engine is, and no replica holds work it has not started."""
RETRY_SECONDS = 5
RESCAN_SECONDS = 30
"""How often to look for work nobody announced: another replica's, or expired claims."""
INGEST_POLL_SECONDS = 0.1
"""How often the loop looks whether ingests are done before its next chunk."""


class Precomputer:
    def __init__(
        self,
        library: Library,
        chunk_cache: ChunkCache,
        context: NeighbourContext | None,
        tenant_of: Callable[[str], Tenant],
        ingesting: Callable[[], bool] = lambda: False,
    ) -> None:
        self.library = library
        self.chunk_cache = chunk_cache
        self.context = context
        """None: every chunk behind the fixed prefix alone."""
        self.tenant_of = tenant_of
        """A project's tenant (`AppState.tenant`), whose chunk-KV salt a chunk is stored under,
        as its project's requests look it up."""
        self.ingesting = ingesting
        """Whether documents are being ingested now (each chunk waits until not)."""
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._outage = OutageLog(log, "chunk precompute")

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="chunk-precompute")
        self.notify()

    def notify(self) -> None:
        self._wake.set()

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()

    async def _run(self) -> None:
        store = self.library.store
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), RESCAN_SECONDS)
            self._wake.clear()
            try:
                await self._drain(store)
                self._outage.succeeded()
            except LibraryUnavailable as error:
                self._outage.failed(error)
                await asyncio.sleep(RETRY_SECONDS)
                self.notify()
            except Exception:
                log.exception("chunk precompute stopped; retrying in %s s", RETRY_SECONDS)
                await asyncio.sleep(RETRY_SECONDS)
                self.notify()

    async def _drain(self, store: LibraryStore) -> None:
        """Precompute every pending chunk, each once no ingest is running."""
        while True:
            while self.ingesting():
                await asyncio.sleep(INGEST_POLL_SECONDS)
            rows = await asyncio.to_thread(store.claim_pending_chunks, BATCH)
            if not rows:
                return
            for row in rows:
                await self._precompute(store, row)

    async def _precompute(self, store: LibraryStore, row: ChunkRow) -> None:
        tenant = self.tenant_of(await asyncio.to_thread(_project_of, store, row))
        if row.kv_cached:
            await self._refresh(store, row, tenant)
            return
        context = await self._context(row, tenant)
        try:
            salt = tenant.kv_salt
            stats = await self.chunk_cache.precompute(row.token_ids, context, salt=salt)
        except Exception:
            log.exception("precomputing chunk %s of %s failed", row.chunk_index, row.document_id)
            await asyncio.to_thread(store.set_status, row.document_id, "failed")
            await asyncio.to_thread(store.mark_chunk_cached, row.id, None)  # no retry forever
            return
        await self._record(store, row, tenant, _stored_key(stats))

    async def _refresh(self, store: LibraryStore, row: ChunkRow, tenant: Tenant) -> None:
        """A stale chunk: computed again behind its neighbours now, replacing its entry, which
        serves requests until then. When no new entry is stored the chunk is precomputed
        plainly: kept if its old entry is there, else stored behind the fixed prefix. Should
        that fail too, its record stays as it is (logged)."""
        context = await self._context(row, tenant)
        key = await self._stored_or_none(row, tenant, context, replace=True)
        CHUNK_CONTEXT_REFRESHES.labels("failed" if key is None else "replaced").inc()
        if key is None:
            key = await self._stored_or_none(row, tenant, None, replace=False)
        if key is None:
            await asyncio.to_thread(store.cancel_requeue, row.id)
            return
        await self._record(store, row, tenant, key)

    async def _context(self, row: ChunkRow, tenant: Tenant) -> list[list[int]] | None:
        """What the chunk is computed behind; a database outage is raised, to retry it later."""
        if self.context is None:
            return None
        return await asyncio.to_thread(self.context.of, row, tenant.project)

    async def _stored_or_none(
        self, row: ChunkRow, tenant: Tenant, context: list[list[int]] | None, replace: bool
    ) -> str | None:
        """The key the chunk is stored under after this precompute, or None (failure logged)."""
        try:
            stats = await self.chunk_cache.precompute(
                row.token_ids, context, replace=replace, salt=tenant.kv_salt
            )
        except Exception:
            log.exception("refreshing chunk %s of %s failed", row.chunk_index, row.document_id)
            return None
        return _stored_key(stats)

    async def _record(
        self, store: LibraryStore, row: ChunkRow, tenant: Tenant, key: str | None
    ) -> None:
        if not await asyncio.to_thread(store.mark_chunk_cached, row.id, key):
            # The document was deleted meanwhile: drop what was just stored for it.
            await self.chunk_cache.evict([row.token_ids], tenant.kv_salt)


def _project_of(store: LibraryStore, row: ChunkRow) -> str:
    """The project of the chunk's document (``default`` once it is deleted: nothing is kept)."""
    document = store.get_document(row.document_id, project=EVERY_PROJECT)
    return DEFAULT_PROJECT if document is None else document.project


def _stored_key(stats: BlendStats | None) -> str | None:
    """The chunk-store key a precompute stored the chunk under (counted), or None."""
    if stats is None:
        return None
    PRECOMPUTED_CHUNKS.labels("hit" if stats.chunks_hit else "miss").inc()
    return stats.chunk_keys[0] if stats.chunk_keys and not stats.fell_back else None
