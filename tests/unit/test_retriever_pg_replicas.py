"""Two replicas on one PostgreSQL library: what one writes the other serves, whole, and both
follow the database through an outage (a real server, restarted mid-test)."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path

import pytest

from retriever import EVERY_PROJECT
from retriever.library import changelog
from retriever.library.documents import NewDocument
from retriever.library.facade import Library
from retriever.library.interfaces import LibraryUnavailable
from tests.unit import pg_library_parts
from tests.unit.pg_library_parts import CHUNK_TOKENS, WordEmbedder
from tests.unit.tenants import DEFAULT

postgres = pg_library_parts.postgres
database_url = pg_library_parts.database_url
tokenizer = pg_library_parts.tokenizer

WAIT_SECONDS = 30.0
TOWER = "The Eiffel Tower in Paris is 330 metres tall.\n\nIt was built for the World's Fair."
BREAD = "Sourdough bread rises thanks to wild yeast.\n\nBakers feed the starter every day."
PLANTS = "Photosynthesis turns sunlight and water into sugar.\n\nLeaves give off oxygen."


def eventually(condition: Callable[[], bool]) -> None:
    """Wait for a replica to follow; fails only if it never does."""
    deadline = time.monotonic() + WAIT_SECONDS
    while not condition():
        assert time.monotonic() < deadline, "the replica did not follow the database"
        time.sleep(0.05)


@pytest.fixture
def replicas(tmp_path: Path, tokenizer, database_url) -> Iterator[Callable[..., Library]]:
    opened: list[Library] = []

    def open_replica(name: str, kind: str = "flat") -> Library:
        library = Library(
            tmp_path / name, tokenizer, WordEmbedder(), kind, CHUNK_TOKENS, database_url
        )
        opened.append(library)
        return library

    yield open_replica
    for library in opened:
        library.close()


def found(library: Library, query: str) -> set[str]:
    return {
        hit.document_id for hit in library.search(query, top_k=5, min_score=0.3, tenant=DEFAULT)
    }


@pytest.mark.parametrize("kind", ["flat", "hnsw"])
def test_ingest_on_one_replica_is_retrievable_on_the_other(replicas, kind):
    a, b = replicas("a", kind), replicas("b", kind)
    a.ingest([NewDocument("tower", TOWER), NewDocument("bread", BREAD)], tenant=DEFAULT)
    assert found(a, "How tall is the Eiffel Tower?") == {"tower"}  # read-your-writes
    eventually(lambda: found(b, "How tall is the Eiffel Tower?") == {"tower"})
    assert b.get("bread", tenant=DEFAULT).status == "indexed"
    assert b.index.ids() == a.index.ids() == a.store.chunk_ids(project=EVERY_PROJECT)


def test_delete_on_one_replica_is_gone_from_the_other(replicas):
    a, b = replicas("a"), replicas("b")
    a.ingest([NewDocument("tower", TOWER), NewDocument("bread", BREAD)], tenant=DEFAULT)
    eventually(lambda: "tower" in found(b, "Eiffel Tower"))
    assert [row.chunk_index for row in b.delete("tower", tenant=DEFAULT)] == [0]
    assert found(b, "Eiffel Tower") == set()
    eventually(lambda: found(a, "Eiffel Tower") == set())
    assert a.get("tower", tenant=DEFAULT) is None
    assert found(a, "sourdough yeast") == {"bread"}


def test_a_new_replica_starts_from_a_snapshot_without_embedding(replicas):
    a = replicas("a")
    a.ingest([NewDocument("tower", TOWER), NewDocument("bread", BREAD)], tenant=DEFAULT)
    a.delete("bread", tenant=DEFAULT)
    late = replicas("late", "hnsw")
    assert late.index.ids() == a.store.chunk_ids(project=EVERY_PROJECT)
    assert found(late, "Eiffel Tower") == {"tower"}


def test_a_batch_is_applied_whole(replicas):
    a, b = replicas("a"), replicas("b")
    sizes: set[int] = set()
    done = threading.Event()

    def watch() -> None:
        while not done.is_set():
            sizes.add(len(b.index))

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        a.ingest([NewDocument(f"d{n}", f"{TOWER} Copy {n}.") for n in range(6)], tenant=DEFAULT)
        total = len(a.index)
        eventually(lambda: len(b.index) == total)
    finally:
        done.set()
        watcher.join()
    assert total >= 6
    assert sizes <= {0, total}


def test_a_replica_catches_up_after_the_database_restarts(replicas, postgres, caplog):
    a, b = replicas("a"), replicas("b")
    a.ingest([NewDocument("tower", TOWER)], tenant=DEFAULT)
    eventually(lambda: "tower" in found(b, "Eiffel Tower"))
    caplog.set_level(logging.WARNING, logger="retriever.search.index_follower")
    postgres.kill()
    with pytest.raises(LibraryUnavailable, match=r"^document library unavailable: "):
        a.ingest([NewDocument("bread", BREAD)], tenant=DEFAULT)
    time.sleep(1.0)  # several failed polls, one warning
    postgres.start()
    a.ingest([NewDocument("plants", PLANTS)], tenant=DEFAULT)
    eventually(lambda: found(b, "photosynthesis oxygen") == {"plants"})
    assert b.get("bread", tenant=DEFAULT) is None
    assert b.index.ids() == a.store.chunk_ids(project=EVERY_PROJECT)
    paused = [r for r in caplog.records if "paused" in r.getMessage()]
    resumed = [r for r in caplog.records if "resumed" in r.getMessage()]
    assert (len(paused), len(resumed)) == (2, 2)  # once per replica


def test_a_replica_behind_the_trimmed_log_rebuilds(replicas, postgres):
    a, b = replicas("a"), replicas("b")
    b.backend.follower.stop()
    a.ingest([NewDocument("tower", TOWER)], tenant=DEFAULT)
    a.ingest([NewDocument("bread", BREAD)], tenant=DEFAULT)
    a.delete("tower", tenant=DEFAULT)
    a.ingest([NewDocument("plants", PLANTS)], tenant=DEFAULT)
    with postgres.connect() as connection, connection.transaction():
        assert changelog.trim(connection, older_than=timedelta(0)) == 3
    b.backend.follower.catch_up()
    assert b.index.ids() == a.store.chunk_ids(project=EVERY_PROJECT)
    assert found(b, "Eiffel Tower") == set()
    assert found(b, "photosynthesis oxygen") == {"plants"}


def test_a_replica_started_while_the_database_is_down_follows_once_it_is_up(replicas, postgres):
    postgres.stop()
    early = replicas("early")
    with pytest.raises(LibraryUnavailable):
        early.ingest([NewDocument("tower", TOWER)], tenant=DEFAULT)
    postgres.start()
    a = replicas("a")
    a.ingest([NewDocument("bread", BREAD)], tenant=DEFAULT)
    eventually(lambda: found(early, "sourdough yeast") == {"bread"})
    early.ingest([NewDocument("tower", TOWER)], tenant=DEFAULT)
    assert found(early, "Eiffel Tower") == {"tower"}
