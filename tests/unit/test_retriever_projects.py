"""Projects in the embedded (SQLite) library: each sees only its own documents, chunks, files,
vector stores and responses and names its documents in its own id space, a library written
before projects opens with all of it in `default`, and one written before ids per project with
every document under the id its project gave."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from retriever import EVERY_PROJECT
from retriever.db.sqlite_schema import _MIGRATIONS, _SCHEMA
from retriever.library.documents import NewDocument
from retriever.library.facade import STORE_FILE, Library
from retriever.objects.cursor_pages import PageRequest
from retriever.objects.rag_objects import RagObjects
from tests.unit import project_scenarios
from tests.unit.gateway_fakes import CharTokenizer, WordEmbedder
from tests.unit.tenants import DEFAULT, tenant


@pytest.fixture
def opened(tmp_path: Path) -> Iterator[tuple[Library, RagObjects]]:
    library = Library(tmp_path / "library", CharTokenizer(), WordEmbedder(), chunk_tokens=400)
    objects = RagObjects(tmp_path / "library" / STORE_FILE)
    yield library, objects
    objects.close()
    library.close()


def test_documents_stay_in_their_project(opened):
    project_scenarios.documents_stay_in_their_project(opened[0])


def test_objects_stay_in_their_project(opened):
    project_scenarios.objects_stay_in_their_project(*opened)


def test_a_library_written_before_projects_opens_with_everything_in_default(tmp_path):
    path = tmp_path / "library" / STORE_FILE
    path.parent.mkdir()
    legacy = sqlite3.connect(path)
    for statement in _SCHEMA + tuple(s for v in (2, 3, 4, 5) for s in _MIGRATIONS[v]):
        legacy.execute(statement)
    legacy.execute("PRAGMA user_version = 5")
    legacy.execute("INSERT INTO documents VALUES ('pump', 'h', '{}', 'indexed', 0, 1, 24)")
    legacy.execute(
        "INSERT INTO chunks (document_id, chunk_index, text, token_ids) "
        "VALUES ('pump', 0, 'fault F-2291 in the pump', x'01000000')"
    )
    legacy.execute(
        "INSERT INTO files (id, document_id, owns_document, filename, purpose, bytes, content, "
        "created_at) VALUES ('file-1', 'pump', 1, 'pump.txt', 'assistants', 3, x'616263', 0)"
    )
    legacy.execute(
        "INSERT INTO vector_stores (id, name, metadata, created_at, last_active_at) "
        "VALUES ('vs_1', 'docs', '{}', 0, 0)"
    )
    legacy.execute(
        "INSERT INTO responses (id, body, conversation, created_at) "
        "VALUES ('resp_1', '{}', '[]', 0)"
    )
    legacy.commit()
    legacy.close()
    library = Library(tmp_path / "library", CharTokenizer(), WordEmbedder())
    objects = RagObjects(path)
    try:
        assert library.get("pump", tenant=DEFAULT).project == "default"
        assert [hit.document_id for hit in library.search("F-2291", 2, tenant=DEFAULT)] == ["pump"]
        assert library.search("F-2291", 2, tenant=tenant("other")) == []
        default = objects.in_project(DEFAULT)
        assert default.files.content("file-1") == b"abc"
        assert default.vector_stores.get("vs_1").name == "docs"
        assert default.responses.get("resp_1") is not None
        other = objects.in_project(tenant("other"))
        assert other.files.page(PageRequest()) == ([], False)
        assert other.vector_stores.get("vs_1") is None
        assert other.responses.get("resp_1") is None
    finally:
        objects.close()
        library.close()


def test_stored_sizes_are_counted_per_project(opened):
    project_scenarios.stored_sizes_are_counted_per_project(*opened)


def test_document_ids_are_per_project(opened):
    project_scenarios.document_ids_are_per_project(*opened)


def test_a_library_written_before_ids_per_project_keeps_every_projects_ids(tmp_path):
    """Schema version 6 stored every id as given: another project's documents, their chunks and
    files are renamed inside the library, and still answer to the ids their project gave."""
    path = tmp_path / "library" / STORE_FILE
    library = Library(tmp_path / "library", CharTokenizer(), WordEmbedder(), chunk_tokens=400)
    objects = RagObjects(path)
    library.ingest([project_scenarios.SECRET], tenant=tenant("a"))
    library.ingest([project_scenarios.SAME_TEXT], tenant=DEFAULT)
    objects.in_project(tenant("a")).files.add(
        "file-a", "pump", True, "pump.txt", "assistants", b"x"
    )
    objects.close()
    library.close()
    legacy = sqlite3.connect(path)  # as schema version 6 left it: `a`'s ids unqualified
    legacy.execute("PRAGMA foreign_keys = OFF")
    for table, column in (("documents", "id"), ("chunks", "document_id"), ("files", "document_id")):
        legacy.execute(f"UPDATE {table} SET {column} = 'pump' WHERE {column} = 'a/pump'")
    for column in ("start_char", "end_char"):  # version 8's
        legacy.execute(f"ALTER TABLE chunks DROP COLUMN {column}")
    legacy.execute("PRAGMA user_version = 6")
    legacy.commit()
    legacy.close()
    library = Library(tmp_path / "library", CharTokenizer(), WordEmbedder(), chunk_tokens=400)
    objects = RagObjects(path)
    try:
        assert library.get("pump", tenant=tenant("a")).project == "a"
        assert [
            hit.document_id for hit in library.search("fault F-2291", 2, tenant=tenant("a"))
        ] == ["pump"]
        assert objects.in_project(tenant("a")).files.get("file-a").document_id == "pump"
        assert library.list(tenant=DEFAULT)[1] == 1 and library.get("pump", tenant=DEFAULT) is None
        [taken] = library.ingest(
            [NewDocument("pump", "Default's own pump manual.")], tenant=DEFAULT
        )
        assert (taken.id, taken.created) == ("pump", True)
        assert (
            library.store.get_document("a/pump", project=EVERY_PROJECT).project == "a"
        )  # stored qualified
    finally:
        objects.close()
        library.close()
