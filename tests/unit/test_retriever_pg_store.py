"""The PostgreSQL document store: the change log's order under concurrent writers, precompute
claimed once across replicas, and nothing half-stored when a batch fails or the server dies."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import numpy as np
import pytest

from retriever import EVERY_PROJECT
from retriever.db.postgres import PgDatabase
from retriever.ingest.chunking import Chunk
from retriever.library import changelog
from retriever.library.document_store import DocumentStore
from retriever.library.drafts import DocumentConflict
from retriever.library.interfaces import LibraryUnavailable
from retriever.library.records import DEFAULT_PROJECT, DocumentDraft
from tests.unit import pg_library_parts

postgres = pg_library_parts.postgres
database_url = pg_library_parts.database_url
DIM = 8
WAIT_SECONDS = 30.0


def draft(doc_id: str | None, content: str, chunk_count: int = 2) -> DocumentDraft:
    chunks = [Chunk(f"{content} part {n}", [n, 7, 70_000], 0, 1) for n in range(chunk_count)]
    return DocumentDraft(
        doc_id, f"hash-{content}", {"title": content}, 100, chunks, DEFAULT_PROJECT
    )


def vectors(*drafts: DocumentDraft) -> np.ndarray:
    rows = sum(len(d.chunks) for d in drafts)
    return np.random.default_rng(rows).random((rows, DIM), dtype=np.float32)


def add(store: DocumentStore, *drafts: DocumentDraft):
    return store.add_documents(list(drafts), vectors(*drafts))


@pytest.fixture
def open_store(database_url) -> Iterator:
    opened: list[DocumentStore] = []

    def open_() -> DocumentStore:
        opened.append(DocumentStore(PgDatabase(database_url)))
        return opened[-1]

    yield open_
    for store in opened:
        store.close()


def log(postgres) -> list[tuple[int, str, list[str]]]:
    with postgres.connect() as connection:
        changes = changelog.changes_after(connection, 0, 10_000)
    return [(change.seq, change.kind, change.document_ids) for change in changes]


def test_every_write_logs_one_change_with_its_vectors(open_store, postgres):
    store = open_store()
    first = add(store, draft("a", "a"), draft("b", "b", 3))
    add(store, draft("copy", "a"))  # stored already: no change
    store.delete_document("a", project=EVERY_PROJECT)
    assert [(kind, ids) for _, kind, ids in log(postgres)] == [
        ("add", ["a", "b"]),
        ("delete", ["a"]),
    ]
    with postgres.connect() as connection:
        stored = changelog.vectors_of(connection, first[1].chunk_ids)
    np.testing.assert_array_equal(
        np.stack([stored[i] for i in first[1].chunk_ids]),
        vectors(draft("a", "a"), draft("b", "b", 3))[2:],
    )
    assert store.get_document("b", project=EVERY_PROJECT).status == "indexed"


def test_a_follower_never_skips_a_change_committed_late(open_store, postgres):
    writers = [open_store() for _ in range(4)]
    seen: list[int] = []
    done = threading.Event()

    def follow() -> None:
        with postgres.connect() as connection:
            while True:
                finished = done.is_set()
                last = seen[-1] if seen else 0
                seen.extend(change.seq for change in changelog.changes_after(connection, last, 50))
                if finished:
                    return

    def write(number: int, store: DocumentStore) -> None:
        for round_ in range(15):
            name = f"w{number}-{round_}"
            add(store, draft(name, name, 1))
            if round_ % 3 == 0:
                store.delete_document(name, project=EVERY_PROJECT)

    follower = threading.Thread(target=follow)
    follower.start()
    threads = [threading.Thread(target=write, args=pair) for pair in enumerate(writers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    done.set()
    follower.join()
    assert seen == [seq for seq, _, _ in log(postgres)]
    assert len(seen) == 4 * (15 + 5)


def test_a_failed_batch_stores_and_logs_nothing(open_store, postgres):
    store = open_store()
    add(store, draft("kept", "kept"))
    with pytest.raises(DocumentConflict):
        add(store, draft("new", "new"), draft("kept", "changed"))
    assert store.get_document("new", project=EVERY_PROJECT) is None
    assert store.list_documents(project=EVERY_PROJECT)[1] == 1
    assert len(log(postgres)) == 1


def test_the_server_dying_mid_batch_leaves_nothing_half_stored(open_store, postgres):
    store = open_store()
    blocker = postgres.connect()
    blocker.execute("BEGIN")
    blocker.execute(  # holds the content hash the batch's second document needs
        "INSERT INTO documents (id, content_hash, metadata, status, created_at, num_chunks, "
        "num_chars) VALUES ('blocker', 'hash-second', '{}', 'indexed', 0, 0, 0)"
    )
    outcome: list[BaseException] = []

    def ingest() -> None:
        try:
            add(store, draft("first", "first"), draft("second", "second"))
        except BaseException as error:
            outcome.append(error)

    writer = threading.Thread(target=ingest)
    writer.start()
    wait_for_lock_waiter(postgres)  # "first" is inserted, "second" waits on the unique index
    postgres.kill()
    writer.join(WAIT_SECONDS)
    blocker.close()
    assert isinstance(outcome[0], LibraryUnavailable)
    assert str(outcome[0]).startswith("document library unavailable: ")
    with pytest.raises(LibraryUnavailable):
        store.list_documents(project=EVERY_PROJECT)
    postgres.start()
    assert store.list_documents(project=EVERY_PROJECT) == ([], 0)
    assert store.chunk_ids(project=EVERY_PROJECT) == set()
    assert log(postgres) == []


def wait_for_lock_waiter(postgres) -> None:
    deadline = time.monotonic() + WAIT_SECONDS
    with postgres.connect() as connection:
        while not connection.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
        ).fetchone()[0]:
            assert time.monotonic() < deadline, "the batch never reached the locked row"
            time.sleep(0.05)


def test_each_chunk_is_claimed_by_one_replica(open_store):
    one, two = open_store(), open_store()
    added = add(one, *[draft(f"d{n}", f"d{n}", 5) for n in range(8)])
    everything = {chunk_id for insertion in added for chunk_id in insertion.chunk_ids}
    claims: dict[str, list[int]] = {"one": [], "two": []}

    def drain(name: str, store: DocumentStore) -> None:
        while rows := store.claim_pending_chunks(3):
            claims[name] += [row.id for row in rows]

    threads = [threading.Thread(target=drain, args=pair) for pair in [("one", one), ("two", two)]]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert set(claims["one"]).isdisjoint(claims["two"])
    assert sorted(claims["one"] + claims["two"]) == sorted(everything)


def test_a_dead_replicas_claims_expire_and_finished_chunks_are_not_claimed(open_store, postgres):
    crashed, alive = open_store(), open_store()
    chunk_ids = add(crashed, draft("a", "a", 3))[0].chunk_ids
    assert [row.id for row in crashed.claim_pending_chunks(10)] == chunk_ids
    assert alive.claim_pending_chunks(10) == []
    assert crashed.mark_chunk_cached(chunk_ids[0], "key-0")
    with postgres.connect() as connection:  # the lease runs out
        connection.execute("UPDATE chunks SET claimed_until = now() - interval '1 second'")
    assert [row.id for row in alive.claim_pending_chunks(10)] == chunk_ids[1:]


def test_document_status_follows_the_chunk_store(open_store):
    store = open_store()
    chunk_ids = add(store, draft("a", "a", 2))[0].chunk_ids
    store.mark_chunk_cached(chunk_ids[0], "key-0")
    assert store.get_document("a", project=EVERY_PROJECT).status == "indexed"
    store.mark_chunk_cached(chunk_ids[1], "key-1")
    assert store.get_document("a", project=EVERY_PROJECT).status == "cached"
    assert store.progress() == ({"cached": 1}, 0)
    assert store.apply_kv_presence([], ["key-1"]) == []
    assert store.get_document("a", project=EVERY_PROJECT).status == "indexed"
    assert store.apply_kv_presence(["key-1"], []) == ["a"]


def test_replicas_starting_together_create_the_tables_once(database_url):
    errors: list[BaseException] = []
    opened: list[PgDatabase] = []

    def open_database() -> None:
        try:
            opened.append(PgDatabase(database_url))
            with opened[-1].reading() as connection:
                connection.execute("SELECT count(*) FROM library_changes")
        except BaseException as error:
            errors.append(error)

    threads = [threading.Thread(target=open_database) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for database in opened:
        database.close()
    assert errors == []
