"""Document status keeps following the chunk store through a database outage: what the engine
reported while PostgreSQL was down is written once it is back, and the outage is logged once."""

from __future__ import annotations

import asyncio
import logging

import numpy as np

from gateway.rag.kv_status import KVStatusFollower
from retriever import EVERY_PROJECT
from retriever.db.postgres import PgDatabase
from retriever.ingest.chunking import Chunk
from retriever.library.document_store import DocumentStore
from retriever.library.records import DEFAULT_PROJECT, DocumentDraft
from tests.unit import pg_library_parts

postgres = pg_library_parts.postgres
database_url = pg_library_parts.database_url


def report(
    follower: KVStatusFollower, present: tuple[str, ...], evicted: tuple[str, ...] = ()
) -> None:
    """What the engine reports with one request: the chunks it holds, then those it lost."""
    follower.observe(present)
    follower.evicted(evicted)


def test_presence_observed_during_an_outage_is_written_after_it(database_url, postgres, caplog):
    store = DocumentStore(PgDatabase(database_url))
    chunks = [Chunk(f"part {n}", [n], 0, 1) for n in range(2)]
    draft = DocumentDraft("a", "hash-a", {}, 10, chunks, DEFAULT_PROJECT)
    chunk_ids = store.add_documents([draft], np.ones((2, 4), dtype=np.float32))[0].chunk_ids
    for number, chunk_id in enumerate(chunk_ids):
        store.mark_chunk_cached(chunk_id, f"key-{number}")
    follower = KVStatusFollower(store)
    caplog.set_level(logging.WARNING, logger="gateway.rag.kv_status")

    async def scenario() -> None:
        report(follower, (), evicted=("key-0",))
        await follower.apply()
        assert store.get_document("a", project=EVERY_PROJECT).status == "indexed"
        postgres.stop()
        report(follower, ("key-0",))
        await follower.apply()  # fails, kept
        report(follower, ("key-1",), evicted=("key-0",))
        report(follower, ("key-0",))  # the newest word on key-0: present
        await follower.apply()
        postgres.start()
        await follower.apply()

    try:
        asyncio.run(scenario())
        assert store.get_document("a", project=EVERY_PROJECT).status == "cached"
    finally:
        store.close()
    messages = [record.getMessage() for record in caplog.records]
    assert sum("paused" in message for message in messages) == 1
    assert sum("resumed" in message for message in messages) == 1
