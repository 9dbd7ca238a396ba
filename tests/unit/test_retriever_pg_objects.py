"""OpenAI's files, vector stores and stored responses on the shared PostgreSQL database: what one
replica creates, the other serves; failed writes store nothing; deleted documents take their
files along."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest

from retriever import EVERY_PROJECT
from retriever.db.postgres import PgDatabase
from retriever.ingest.chunking import Chunk
from retriever.library.document_store import DocumentStore
from retriever.library.records import DEFAULT_PROJECT, DocumentDraft
from retriever.objects.cursor_pages import PageRequest
from retriever.objects.rag_objects import RagObjects
from retriever.objects.response_store import StoredResponse
from retriever.objects.vector_store_queries import Attachment, UnknownFiles
from tests.unit import pg_library_parts
from tests.unit.tenants import DEFAULT

postgres = pg_library_parts.postgres
database_url = pg_library_parts.database_url


@pytest.fixture
def replicas(tmp_path, database_url) -> Iterator[tuple[DocumentStore, RagObjects, RagObjects]]:
    store = DocumentStore(PgDatabase(database_url))
    first = RagObjects(tmp_path / "a.sqlite3", database_url).in_project(DEFAULT)
    second = RagObjects(tmp_path / "b.sqlite3", database_url).in_project(DEFAULT)
    yield store, first, second
    for opened in (first, second, store):
        opened.close()


def add_document(store: DocumentStore, doc_id: str) -> None:
    chunk = Chunk(f"text of {doc_id}", [1, 2, 3], 0, 10)
    draft = DocumentDraft(doc_id, f"hash-{doc_id}", {}, 10, [chunk], DEFAULT_PROJECT)
    store.add_documents([draft], np.ones((1, 4), dtype=np.float32))


def test_objects_made_on_one_replica_are_served_by_the_other(replicas):
    store, first, second = replicas
    for name in ("a", "b"):
        add_document(store, name)
        first.files.add(f"file-{name}", name, True, f"{name}.txt", "assistants", b"0123456789")
    made = first.vector_stores.create(
        "docs", "handbook", {"team": "ops"}, 7, [Attachment("file-a", {"year": 2024})]
    )
    batch = second.vector_stores.create_batch(made.id, [Attachment("file-b", {"year": 2025})])
    assert second.files.content("file-a") == b"0123456789"
    seen = second.vector_stores.get(made.id)
    assert (seen.name, seen.metadata, seen.file_counts.total) == ("docs", {"team": "ops"}, 2)
    assert first.vector_stores.get_batch(made.id, batch.id).file_counts.total == 1
    files, more = first.vector_stores.page_files(made.id, PageRequest(limit=1, order="asc"))
    assert ([f.file_id for f in files], more) == (["file-a"], True)
    after = PageRequest(limit=5, order="asc", after="file-a")
    assert [f.file_id for f in first.vector_stores.page_files(made.id, after)[0]] == ["file-b"]
    first.vector_stores.set_attributes(made.id, "file-b", {"year": 2026})
    searchable = second.vector_stores.searchable_files([made.id, "vs_unknown"])
    assert [(f.file_id, f.attributes, f.status) for f in searchable] == [
        ("file-a", {"year": 2024}, "completed"),
        ("file-b", {"year": 2026}, "completed"),
    ]
    first.responses.save(StoredResponse("resp_1", {"output": "hi"}, [{"role": "user"}]))
    assert second.responses.get("resp_1").body == {"output": "hi"}


def test_a_failed_attach_stores_nothing_and_a_deleted_document_takes_its_file(replicas):
    store, first, second = replicas
    add_document(store, "a")
    first.files.add("file-a", "a", True, "a.txt", "assistants", b"x")
    made = first.vector_stores.create("docs", None, {}, None, [])
    with pytest.raises(UnknownFiles):
        second.vector_stores.attach(made.id, [Attachment("file-a", {}), Attachment("nope", {})])
    assert first.vector_stores.get(made.id).file_counts.total == 0
    second.vector_stores.attach(made.id, [Attachment("file-a", {})])
    store.delete_document("a", project=EVERY_PROJECT)
    assert first.files.get("file-a") is None
    assert second.vector_stores.get(made.id).file_counts.total == 0
    assert second.vector_stores.delete(made.id)
    assert first.vector_stores.page(PageRequest()) == ([], False)
