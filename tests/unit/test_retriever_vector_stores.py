"""Files and vector stores in the library's database: all-or-nothing attaches, shared documents,
cascades from deleted documents, states read from the documents, and the schema upgrade."""

import sqlite3
from dataclasses import replace

import pytest

from retriever import EVERY_PROJECT
from retriever.db.sqlite_schema import _MIGRATIONS, _SCHEMA
from retriever.ingest.chunking import Chunk
from retriever.library.document_store import DocumentStore
from retriever.library.records import DEFAULT_PROJECT, DocumentDraft
from retriever.objects.cursor_pages import PageRequest
from retriever.objects.rag_objects import RagObjects
from retriever.objects.vector_store_queries import Attachment, UnknownFiles, UnknownVectorStore
from tests.unit.tenants import DEFAULT


@pytest.fixture
def library(tmp_path):
    store = DocumentStore(tmp_path / "documents.sqlite3")
    objects = RagObjects(store.path).in_project(DEFAULT)
    yield store, objects
    objects.close()
    store.close()


def add_document(store: DocumentStore, doc_id: str, status: str = "indexed") -> None:
    chunk = Chunk(f"text of {doc_id}", [1, 2, 3], 0, 10)
    store.add_documents([DocumentDraft(doc_id, f"hash-{doc_id}", {}, 10, [chunk], DEFAULT_PROJECT)])
    store.set_status(doc_id, status)


def add_file(objects: RagObjects, file_id: str, doc_id: str, owns: bool = True) -> None:
    objects.files.add(file_id, doc_id, owns, f"{file_id}.txt", "assistants", b"0123456789")


def test_a_store_created_with_an_unknown_file_stores_nothing(library):
    store, objects = library
    add_document(store, "a")
    add_file(objects, "file-a", "a")
    attachments = [Attachment("file-a", {}), Attachment("file-missing", {})]
    with pytest.raises(UnknownFiles) as refused:
        objects.vector_stores.create("docs", None, {}, None, attachments)
    assert refused.value.file_ids == ["file-missing"]
    assert objects.vector_stores.page(PageRequest()) == ([], False)


def test_a_failed_batch_attaches_none_of_its_files(library):
    store, objects = library
    add_document(store, "a")
    add_file(objects, "file-a", "a")
    vector_store = objects.vector_stores.create("docs", None, {}, None, [])
    with pytest.raises(UnknownFiles):
        objects.vector_stores.create_batch(
            vector_store.id, [Attachment("file-a", {}), Attachment("file-missing", {})]
        )
    assert objects.vector_stores.page_files(vector_store.id, PageRequest()) == ([], False)
    assert objects.vector_stores.get(vector_store.id).file_counts.total == 0
    with pytest.raises(UnknownVectorStore):
        objects.vector_stores.create_batch("vs_nothing", [Attachment("file-a", {})])


def test_file_state_counts_and_search_follow_the_document(library):
    store, objects = library
    add_document(store, "ready")
    add_document(store, "busy", status="pending")
    add_file(objects, "file-ready", "ready")
    add_file(objects, "file-busy", "busy")
    attachments = [Attachment("file-ready", {"team": "ops"}), Attachment("file-busy", {})]
    vector_store = objects.vector_stores.create("docs", None, {"k": "v"}, 7, attachments)
    assert (vector_store.status, vector_store.file_counts.in_progress) == ("in_progress", 1)
    assert vector_store.usage_bytes == 20 and vector_store.metadata == {"k": "v"}
    busy = objects.vector_stores.get_file(vector_store.id, "file-busy")
    assert busy.status == "in_progress"
    searchable = objects.vector_stores.searchable_files([vector_store.id])
    assert [(f.file_id, f.attributes) for f in searchable] == [("file-ready", {"team": "ops"})]
    store.set_status("busy", "cached")
    assert objects.vector_stores.get(vector_store.id).status == "completed"
    completed, _ = objects.vector_stores.page_files(vector_store.id, PageRequest(), "completed")
    assert {f.file_id for f in completed} == {"file-ready", "file-busy"}


def test_a_shared_document_goes_with_the_last_file_that_uses_it(library):
    store, objects = library
    add_document(store, "a")
    add_file(objects, "file-first", "a", owns=True)
    add_file(objects, "file-same-text", "a", owns=False)
    assert objects.files.delete("file-first") == (True, None)
    assert objects.files.delete("file-same-text") == (True, "a")
    assert objects.files.delete("file-same-text") == (False, None)


def test_deleting_a_document_removes_its_files_from_every_store(library):
    store, objects = library
    add_document(store, "a")
    add_file(objects, "file-a", "a")
    vector_store = objects.vector_stores.create("docs", None, {}, None, [Attachment("file-a", {})])
    store.delete_document("a", project=EVERY_PROJECT)
    assert objects.files.get("file-a") is None
    assert objects.vector_stores.get(vector_store.id).file_counts.total == 0


def test_a_version_2_library_is_upgraded_with_its_documents_kept(tmp_path):
    path = tmp_path / "documents.sqlite3"
    legacy = sqlite3.connect(path)
    for statement in (*_SCHEMA, *_MIGRATIONS[2]):
        legacy.execute(statement)
    legacy.execute("PRAGMA user_version = 2")
    legacy.execute("INSERT INTO documents VALUES ('a', 'h', '{}', 'cached', 0, 1, 1)")
    legacy.commit()
    legacy.close()
    objects = RagObjects(path).in_project(DEFAULT)
    add_file(objects, "file-a", "a", owns=False)
    assert objects.files.get("file-a").document_id == "a"
    objects.close()
    store = DocumentStore(path)
    assert store.get_document("a", project=EVERY_PROJECT).status == "cached"
    store.close()


def test_a_store_expires_days_after_its_last_use(library):
    _, objects = library
    vector_store = objects.vector_stores.create("docs", None, {}, 2, [])
    assert vector_store.status == "completed"
    assert vector_store.expires_at == vector_store.last_active_at + 2 * 86_400
    assert replace(vector_store, last_active_at=0).status == "expired"
    unchanged = objects.vector_stores.update(vector_store.id, {"expires_after_days": None})
    assert (unchanged.expires_at, unchanged.status) == (None, "completed")


def test_a_file_moved_to_its_text_chunked_another_way_leaves_its_old_document(library):
    store, objects = library
    for doc_id in ("plain", "static", "shared", "static-shared"):
        add_document(store, doc_id)
    add_file(objects, "file-a", "plain")
    assert objects.files.move_to_document("file-a", "static", owns_document=True) == "plain"
    assert objects.files.get("file-a").document_id == "static"
    assert objects.files.move_to_document("file-a", "static", owns_document=True) is None
    # a document another file still uses is handed over, not deleted
    add_file(objects, "file-b", "shared")
    add_file(objects, "file-c", "shared", owns=False)
    assert objects.files.move_to_document("file-b", "static-shared", owns_document=False) is None
    assert objects.files.delete("file-c") == (True, "shared")
    # the document a move found (not created) stays when the file goes
    assert objects.files.delete("file-b") == (True, None)
    vector_store = objects.vector_stores.create("docs", None, {}, None, [Attachment("file-a", {})])
    assert objects.files.vector_stores_of("file-a") == [vector_store.id]
    assert objects.files.vector_stores_of("file-missing") == []
