"""Metadata filters and cited character spans in the shared (PostgreSQL) library, on a real
server: filters choose documents before the search ranks, every chunk cites its span of the
extracted text from a replica started afterwards, and a database written before spans were kept
is upgraded with its old chunks cited without one (null) while new chunks get theirs."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from retriever.db.pg_schema import SCHEMA_VERSION
from retriever.library.documents import NewDocument
from retriever.library.facade import Library
from tests.unit import filter_span_scenarios as scenarios
from tests.unit import pg_library_parts
from tests.unit.gateway_fakes import CharTokenizer, WordEmbedder
from tests.unit.tenants import DEFAULT

postgres = pg_library_parts.postgres
database_url = pg_library_parts.database_url


@pytest.fixture
def open_library(tmp_path: Path, database_url: str) -> Iterator[Callable[[], Library]]:
    """Opens a replica on the database, closing the one opened before (a restart)."""
    opened: list[Library] = []

    def open_() -> Library:
        if opened:
            opened[-1].close()
        where = tmp_path / str(len(opened))
        library = Library(where, CharTokenizer(), WordEmbedder(), "flat", 400, database_url)
        opened.append(library)
        return library

    yield open_
    opened[-1].close()


def test_filters_choose_documents_before_top_k(open_library):
    scenarios.filters_choose_documents_before_top_k(open_library())


def test_spans_slice_the_extracted_text_across_a_restart(open_library):
    scenarios.spans_slice_the_extracted_text(open_library(), open_library)


def test_chunks_stored_before_spans_are_cited_without_one(open_library, postgres):
    open_library().ingest([NewDocument("old", "The cat sat by the sea.")], tenant=DEFAULT)
    with postgres.connect() as connection:  # as schema version 5 left it
        connection.execute("ALTER TABLE chunks DROP COLUMN start_char, DROP COLUMN end_char")
        connection.execute("DELETE FROM library_schema")
        connection.execute("INSERT INTO library_schema VALUES (5)")
    library = open_library()
    [old] = library.search("cat sea", 5, tenant=DEFAULT)
    assert (old.document_id, old.text, old.start_char, old.end_char) == (
        "old",
        "The cat sat by the sea.",
        None,
        None,
    )
    library.ingest([NewDocument("new", "A dog under the sky.")], tenant=DEFAULT)
    [new] = library.search("dog sky", 1, document_ids=["new"], tenant=DEFAULT)
    assert (new.start_char, new.end_char) == (0, len("A dog under the sky."))
    with postgres.connect() as connection:
        version = connection.execute("SELECT max(version) FROM library_schema").fetchone()
    assert version == (SCHEMA_VERSION,)
