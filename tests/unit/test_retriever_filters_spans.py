"""Metadata filters and cited character spans in the embedded (SQLite) library: filters choose
documents before the search ranks, every chunk cites its span of the extracted text across a
restart, and a library written before spans were kept opens with its old chunks cited without
one (null) while new chunks get theirs."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from retriever.library.documents import NewDocument
from retriever.library.facade import STORE_FILE, Library
from tests.unit import filter_span_scenarios as scenarios
from tests.unit.gateway_fakes import CharTokenizer, WordEmbedder
from tests.unit.tenants import DEFAULT


@pytest.fixture
def open_library(tmp_path: Path) -> Iterator[Callable[[], Library]]:
    """Opens the library under `tmp_path`, closing the one opened before (a restart)."""
    opened: list[Library] = []

    def open_() -> Library:
        if opened:
            opened[-1].close()
        opened.append(Library(tmp_path, CharTokenizer(), WordEmbedder(), chunk_tokens=400))
        return opened[-1]

    yield open_
    opened[-1].close()


def test_filters_choose_documents_before_top_k(open_library):
    scenarios.filters_choose_documents_before_top_k(open_library())


def test_spans_slice_the_extracted_text_across_a_restart(open_library):
    scenarios.spans_slice_the_extracted_text(open_library(), open_library)


def test_chunks_stored_before_spans_are_cited_without_one(open_library, tmp_path):
    open_library().ingest([NewDocument("old", "The cat sat by the sea.")], tenant=DEFAULT)
    open_library().close()
    legacy = sqlite3.connect(tmp_path / STORE_FILE)  # as schema version 7 left it
    for column in ("start_char", "end_char"):
        legacy.execute(f"ALTER TABLE chunks DROP COLUMN {column}")
    legacy.execute("PRAGMA user_version = 7")
    legacy.commit()
    legacy.close()
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
