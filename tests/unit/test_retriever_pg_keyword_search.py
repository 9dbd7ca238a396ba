"""Keyword search in the shared (PostgreSQL) library: every replica finds what any of them
ingested at once, forgets what any deleted, keeps it across restarts, and a library an older
release wrote gets its chunks indexed (a real server)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from retriever.db.pg_schema import SCHEMA_VERSION
from retriever.library.facade import Library
from retriever.search.ranking import Ranking
from tests.unit import pg_library_parts
from tests.unit.gateway_fakes import CharTokenizer, WordEmbedder
from tests.unit.tenants import DEFAULT
from tests.unit.test_retriever_keyword_search import CALM, CODE, PETS, QUESTION, ids

postgres = pg_library_parts.postgres
database_url = pg_library_parts.database_url
KEYWORDS = Ranking(embedding_weight=0.0, text_weight=1.0)
HYBRID = Ranking(embedding_weight=1.0, text_weight=1.0)


@pytest.fixture
def replicas(tmp_path: Path, database_url: str) -> Iterator[Callable[[str], Library]]:
    opened: list[Library] = []

    def open_replica(name: str) -> Library:
        library = Library(
            tmp_path / name, CharTokenizer(), WordEmbedder(), "flat", 400, database_url
        )
        opened.append(library)
        return library

    yield open_replica
    for library in opened:
        library.close()


def test_every_replica_finds_keywords_at_once_and_forgets_deletes(replicas):
    a, b = replicas("a"), replicas("b")
    a.ingest([CODE, CALM, PETS], tenant=DEFAULT)
    assert ids(b.search("F-2291", top_k=3, ranking=KEYWORDS, tenant=DEFAULT)) == ["pump"]
    assert ids(b.search("Valves sticking", top_k=3, ranking=KEYWORDS, tenant=DEFAULT)) == [
        "pump"
    ]  # stemmed
    assert ids(a.search(QUESTION, top_k=1, tenant=DEFAULT)) == [
        "pets"
    ]  # the stand-in embedder misses codes
    assert ids(a.search(QUESTION, top_k=1, ranking=HYBRID, tenant=DEFAULT)) == ["pump"]
    assert b.delete("pump", tenant=DEFAULT) is not None
    assert a.search("F-2291", top_k=3, ranking=KEYWORDS, tenant=DEFAULT) == []
    assert "pump" not in ids(a.search(QUESTION, top_k=3, ranking=HYBRID, tenant=DEFAULT))


def test_query_syntax_characters_are_only_words(replicas):
    library = replicas("a")
    library.ingest([CODE, CALM], tenant=DEFAULT)
    hostile = "NEAR(fault 'F-2291' OR) & * ^pump :* -valve <-> | ! \\ a_b ²"
    assert ids(library.search(hostile, top_k=2, ranking=KEYWORDS, tenant=DEFAULT))[0] == "pump"
    assert (
        library.search("the of and", top_k=2, ranking=KEYWORDS, tenant=DEFAULT) == []
    )  # stop words only


def test_keyword_hits_survive_a_restart_of_every_replica(replicas):
    first = replicas("first")
    first.ingest([CODE, CALM], tenant=DEFAULT)
    first.close()
    assert ids(replicas("later").search("F-2291", top_k=3, ranking=KEYWORDS, tenant=DEFAULT)) == [
        "pump"
    ]


def test_a_library_written_before_keyword_search_gets_its_chunks_indexed(replicas, postgres):
    replicas("old").ingest([CODE, CALM], tenant=DEFAULT)
    with postgres.connect() as connection:  # as schema version 2 left it
        connection.execute("DROP INDEX chunks_by_word")
        connection.execute("ALTER TABLE chunks DROP COLUMN search_words")
        for table in ("documents", "files", "vector_stores", "responses"):  # version 4's
            connection.execute(f"ALTER TABLE {table} DROP COLUMN project")
        connection.execute("ALTER TABLE chunks DROP COLUMN start_char, DROP COLUMN end_char")
        connection.execute("UPDATE library_schema SET version = 2")
    upgraded = replicas("new")
    assert ids(upgraded.search("F-2291", top_k=3, ranking=KEYWORDS, tenant=DEFAULT)) == ["pump"]
    with postgres.connect() as connection:
        versions = connection.execute("SELECT max(version) FROM library_schema").fetchone()
    assert versions == (SCHEMA_VERSION,)
