"""DocumentStore: all-or-nothing writes, de-duplication, conflicts, deletes and KV bookkeeping."""

import sqlite3

import pytest

from retriever import EVERY_PROJECT
from retriever.db.sqlite_schema import _SCHEMA, SCHEMA_VERSION
from retriever.ingest.chunking import Chunk
from retriever.library.document_store import DocumentConflict, DocumentStore
from retriever.library.records import DEFAULT_PROJECT, DocumentDraft


def chunks(*texts: str) -> list[Chunk]:
    made, offset = [], 0
    for number, text in enumerate(texts):
        made.append(Chunk(text, [number, 100 + number, 70_000], offset, offset + len(text)))
        offset += len(text) + 2
    return made


def draft(doc_id: str | None, content: str, *texts: str) -> DocumentDraft:
    return DocumentDraft(
        doc_id, f"hash-{content}", {"title": content}, 100, chunks(*texts), DEFAULT_PROJECT
    )


@pytest.fixture
def store(tmp_path):
    opened = DocumentStore(tmp_path / "documents.sqlite3")
    yield opened
    opened.close()


def test_added_document_reads_back(store):
    metadata = {"title": "Manual", "tags": ["x"]}
    draft = DocumentDraft("manual", "hash-a", metadata, 9, chunks("one", "two"), DEFAULT_PROJECT)
    inserted = store.add_documents([draft])[0]
    assert inserted.created
    document = store.get_document("manual", project=EVERY_PROJECT)
    assert document == inserted.document
    assert (document.status, document.num_chunks, document.num_chars) == ("pending", 2, 9)
    assert document.metadata == {"title": "Manual", "tags": ["x"]}
    rows = store.chunks_for(inserted.chunk_ids, project=EVERY_PROJECT)
    assert [(row.chunk_index, row.text, row.kv_cached) for row in rows] == [
        (0, "one", False),
        (1, "two", False),
    ]
    assert rows[1].token_ids == [1, 101, 70_000]


def test_generated_ids_are_unique(store):
    first = store.add_documents([draft(None, "a", "x"), draft(None, "b", "y")])
    assert first[0].document.id != first[1].document.id
    assert first[0].document.id.startswith("doc-")


def test_same_content_is_stored_once(store):
    original = store.add_documents([draft("a", "same", "x")])[0]
    again = store.add_documents([draft(None, "same", "x"), draft("other", "same", "x")])
    assert [(i.document.id, i.created, i.chunk_ids) for i in again] == [
        ("a", False, []),
        ("a", False, []),
    ]
    assert store.list_documents(project=EVERY_PROJECT)[1] == 1
    assert store.chunk_ids(project=EVERY_PROJECT) == set(original.chunk_ids)


def test_same_id_with_different_content_conflicts(store):
    store.add_documents([draft("a", "first", "x")])
    with pytest.raises(DocumentConflict, match="'a' already exists"):
        store.add_documents([draft("a", "second", "y")])
    assert store.get_document("a", project=EVERY_PROJECT).content_hash == "hash-first"


def test_a_failing_batch_stores_nothing(store):
    store.add_documents([draft("kept", "kept", "k")])
    bad = DocumentDraft("bad", "hash-bad", {}, 1, [Chunk("z", [2**40], 0, 1)], DEFAULT_PROJECT)
    with pytest.raises(OverflowError):
        store.add_documents([draft("good", "good", "g1", "g2"), bad])
    with pytest.raises(DocumentConflict):
        store.add_documents([draft("good", "good", "g1"), draft("kept", "changed", "c")])
    assert [d.id for d in store.list_documents(project=EVERY_PROJECT)[0]] == ["kept"]
    assert len(store.chunk_ids(project=EVERY_PROJECT)) == 1


def test_list_documents_pages_in_insertion_order(store):
    store.add_documents([draft(f"d{n}", str(n), "t") for n in range(5)])
    page, total = store.list_documents(offset=1, limit=2, project=EVERY_PROJECT)
    assert ([d.id for d in page], total) == (["d1", "d2"], 5)


def test_delete_returns_the_removed_chunks(store):
    inserted = store.add_documents([draft("a", "a", "x", "y"), draft("b", "b", "z")])
    removed = store.delete_document("a", project=EVERY_PROJECT)
    assert [row.id for row in removed] == inserted[0].chunk_ids
    assert removed[0].token_ids == [0, 100, 70_000]
    assert store.get_document("a", project=EVERY_PROJECT) is None
    assert store.chunk_ids(project=EVERY_PROJECT) == set(inserted[1].chunk_ids)
    assert store.delete_document("a", project=EVERY_PROJECT) is None
    assert store.add_documents([draft("a2", "a", "x")])[0].created


def test_chunk_ids_are_never_reused(store):
    first = store.add_documents([draft("a", "a", "x", "y")])[0]
    store.delete_document("a", project=EVERY_PROJECT)
    second = store.add_documents([draft("b", "b", "z")])[0]
    assert min(second.chunk_ids) > max(first.chunk_ids)


def test_chunks_for_keeps_the_requested_order(store):
    ids = store.add_documents([draft("a", "a", "x", "y", "z")])[0].chunk_ids
    wanted = [ids[2], 999, ids[0]]
    assert [row.text for row in store.chunks_for(wanted, project=EVERY_PROJECT)] == ["z", "x"]
    assert store.chunk_ids(["a", "missing"], project=EVERY_PROJECT) == set(ids)


def test_status_and_kv_bookkeeping(store):
    ids = store.add_documents([draft("a", "a", "x", "y"), draft("b", "b", "z")])[0].chunk_ids
    assert store.set_status("a", "cached")
    assert not store.set_status("missing", "failed")
    with pytest.raises(ValueError, match="status"):
        store.set_status("a", "done")  # type: ignore[arg-type]
    assert [d.id for d in store.documents_with_status("cached")] == ["a"]
    assert [d.id for d in store.documents_with_status("pending")] == ["b"]
    assert store.set_status("a", "pending")
    assert store.mark_chunk_cached(ids[0], "k0")
    assert not store.mark_chunk_cached(12345, "k9")
    assert store.pending_chunks(limit=10) == []  # neither document is indexed yet
    assert store.set_status("a", "indexed") and store.set_status("b", "indexed")
    assert [row.text for row in store.pending_chunks(limit=10)] == ["y", "z"]
    assert [row.text for row in store.pending_chunks(limit=1)] == ["y"]
    assert [row.text for row in store.pending_chunks_of("a")] == ["y"]
    assert store.mark_chunk_cached(ids[1], "k1")
    assert store.pending_chunks_of("a") == []
    # its last chunk is stored:
    assert store.get_document("a", project=EVERY_PROJECT).status == "cached"


def _status(store: DocumentStore, doc_id: str) -> str:
    return store.get_document(doc_id, project=EVERY_PROJECT).status


def test_document_status_follows_the_chunk_store(store):
    first = store.add_documents([draft("a", "a", "x", "y")])[0].chunk_ids
    second = store.add_documents([draft("b", "b", "z")])[0].chunk_ids
    store.set_status("a", "indexed")
    store.set_status("b", "indexed")
    store.mark_chunk_cached(first[0], "kx")
    assert _status(store, "a") == "indexed"  # one chunk still to precompute
    store.mark_chunk_cached(first[1], "ky")
    store.mark_chunk_cached(second[0], "kz")
    assert _status(store, "a") == _status(store, "b") == "cached"

    assert store.apply_kv_presence(present=[], evicted=["ky", "unknown"]) == []
    assert _status(store, "a") == "indexed" and _status(store, "b") == "cached"
    assert store.pending_chunks(limit=10) == []  # an eviction is not precomputed again

    assert store.apply_kv_presence(present=["ky"], evicted=[]) == ["a"]
    assert _status(store, "a") == "cached"


def test_a_chunk_that_could_not_be_stored_keeps_its_document_indexed(store):
    ids = store.add_documents([draft("a", "a", "x")])[0].chunk_ids
    store.set_status("a", "indexed")
    store.mark_chunk_cached(ids[0], None)
    assert _status(store, "a") == "indexed" and store.pending_chunks(limit=10) == []


def test_a_version_1_library_is_upgraded_and_precomputed_again(tmp_path):
    path = tmp_path / "documents.sqlite3"
    legacy = sqlite3.connect(path)
    for statement in _SCHEMA:
        legacy.execute(statement)
    legacy.execute("PRAGMA user_version = 1")
    legacy.execute("INSERT INTO documents VALUES ('a', 'h', '{}', 'cached', 0, 1, 1)")
    legacy.execute(
        "INSERT INTO chunks (document_id, chunk_index, text, token_ids, kv_cached) "
        "VALUES ('a', 0, 'x', x'01000000', 1)"
    )
    legacy.commit()
    legacy.close()
    upgraded = DocumentStore(path)
    assert _status(upgraded, "a") == "indexed"
    assert [row.text for row in upgraded.pending_chunks(limit=10)] == ["x"]
    upgraded.close()


def test_reopening_keeps_everything(tmp_path):
    path = tmp_path / "documents.sqlite3"
    first = DocumentStore(path)
    ids = first.add_documents([draft("a", "a", "x")])[0].chunk_ids
    first.close()
    reopened = DocumentStore(path)
    assert reopened.get_document("a", project=EVERY_PROJECT).metadata == {"title": "a"}
    assert [row.text for row in reopened.chunks_for(ids, project=EVERY_PROJECT)] == ["x"]
    reopened.close()


def test_newer_schema_is_refused(tmp_path):
    path = tmp_path / "documents.sqlite3"
    DocumentStore(path).close()
    with sqlite3.connect(path) as connection:
        connection.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    with pytest.raises(RuntimeError, match="schema version"):
        DocumentStore(path)
