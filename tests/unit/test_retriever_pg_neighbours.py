"""Neighbour refresh on the PostgreSQL library: chunks a new ingest makes stale are claimed once
across replicas and stay cached meanwhile, and a library created before `kv_stale` is upgraded
(a real server; chunks embedded at angles: `tests.unit.angle_embedder`)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from retriever.db.pg_schema import SCHEMA_VERSION
from retriever.db.postgres import PgDatabase
from retriever.library.facade import Library
from retriever.search.neighbours import NeighbourPolicy
from tests.unit import pg_library_parts
from tests.unit.angle_embedder import AngleEmbedder, note
from tests.unit.tenants import DEFAULT

postgres = pg_library_parts.postgres
database_url = pg_library_parts.database_url
tokenizer = pg_library_parts.tokenizer
K = 2


@pytest.fixture
def replicas(tmp_path: Path, tokenizer, database_url) -> Iterator[Callable[[str], Library]]:
    opened: list[Library] = []

    def open_replica(name: str) -> Library:
        library = Library(
            tmp_path / name,
            tokenizer,
            AngleEmbedder(),
            database_url=database_url,
            neighbours=NeighbourPolicy(K, window_tokens=10_000),
        )
        opened.append(library)
        return library

    yield open_replica
    for library in opened:
        library.close()


def drain(library: Library, claimed: list[tuple[str, bool]]) -> None:
    """Claim and finish chunks one by one, as the precompute does."""
    while rows := library.store.claim_pending_chunks(1):
        for row in rows:
            claimed.append((row.document_id, row.kv_cached))
            library.store.mark_chunk_cached(row.id, f"key-{row.id}")


def test_stale_chunks_are_claimed_once_across_replicas_and_stay_cached(replicas):
    a, b = replicas("a"), replicas("b")
    a.ingest([note(degrees) for degrees in (0, 40, 80, 210)], tenant=DEFAULT)
    drain(a, [])
    b.ingest([note(5)], tenant=DEFAULT)  # joins the nearest of 0, 40 and 80, not of 210 (80 and 0)
    assert {a.get(f"d{degrees}", tenant=DEFAULT).status for degrees in (0, 40, 80, 210)} == {
        "cached"
    }
    claims: dict[str, list[tuple[str, bool]]] = {"a": [], "b": []}
    threads = [
        threading.Thread(target=drain, args=(library, claims[name]))
        for name, library in (("a", a), ("b", b))
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    claimed = sorted(claims["a"] + claims["b"])
    assert claimed == [("d0", True), ("d40", True), ("d5", False), ("d80", True)]
    assert a.store.claim_pending_chunks(10) == []
    assert {b.get(f"d{degrees}", tenant=DEFAULT).status for degrees in (0, 5, 40, 80, 210)} == {
        "cached"
    }


def test_a_failed_refresh_ends_its_claim_and_keeps_the_kv(replicas):
    library = replicas("a")
    library.ingest([note(0), note(40)], tenant=DEFAULT)
    drain(library, [])
    library.ingest([note(5)], tenant=DEFAULT)
    new, stale_0, stale_40 = library.store.claim_pending_chunks(3)
    assert (new.document_id, stale_0.kv_cached, stale_40.kv_cached) == ("d5", True, True)
    library.store.mark_chunk_cached(new.id, "key-new")
    library.store.cancel_requeue(stale_0.id)
    library.store.cancel_requeue(stale_40.id)
    assert library.store.claim_pending_chunks(10) == []
    assert library.get("d0", tenant=DEFAULT).status == "cached"


def test_a_version_1_library_gains_stale_marks(database_url, postgres):
    PgDatabase(database_url).close()
    with postgres.connect() as connection:
        connection.execute("ALTER TABLE chunks DROP COLUMN kv_stale")
        connection.execute("ALTER TABLE chunks DROP COLUMN search_words")  # version 3's
        connection.execute("ALTER TABLE chunks DROP COLUMN start_char, DROP COLUMN end_char")
        for table in ("documents", "files", "vector_stores", "responses"):  # version 4's
            connection.execute(f"ALTER TABLE {table} DROP COLUMN project")
        connection.execute("DELETE FROM library_schema")
        connection.execute("INSERT INTO library_schema VALUES (1)")
    PgDatabase(database_url).close()
    with postgres.connect() as connection:
        version = connection.execute("SELECT max(version) FROM library_schema").fetchone()[0]
        stale = connection.execute("SELECT count(*) FROM chunks WHERE kv_stale = 0").fetchone()[0]
    assert (version, stale) == (SCHEMA_VERSION, 0)
