"""What two projects sharing one library must never see of each other, written once and run on
both backends (`test_retriever_projects` on SQLite, `test_retriever_pg_projects` on PostgreSQL)."""

from __future__ import annotations

import pytest

from retriever.library.documents import NewDocument
from retriever.library.drafts import DocumentConflict
from retriever.library.facade import Library
from retriever.objects.cursor_pages import PageRequest, UnknownCursor
from retriever.objects.rag_objects import RagObjects
from retriever.objects.response_store import StoredResponse as StoredResponse
from retriever.objects.vector_store_queries import Attachment, UnknownFiles, UnknownVectorStore
from retriever.search.ranking import Ranking
from tests.unit.tenants import DEFAULT, tenant

SECRET = NewDocument("pump", "The sea pump shows fault F-2291 when its valve sticks in the sea.")
SAME_TEXT = NewDocument(None, "A cat and a dog share the garden; the dog digs and the cat naps.")
KEYWORDS = Ranking(embedding_weight=0.0, text_weight=1.0)
HYBRID = Ranking(embedding_weight=1.0, text_weight=1.0)
RANKINGS = (Ranking(), KEYWORDS, HYBRID)


def documents_stay_in_their_project(library: Library) -> None:
    """Ingest, search (every ranking), get, list and delete see only the caller's project; the
    same text in two projects is two documents."""
    [secret, a_copy] = library.ingest([SECRET, SAME_TEXT], tenant=tenant("a"))
    [b_copy] = library.ingest([SAME_TEXT], tenant=tenant("b"))
    assert secret.created and a_copy.created and b_copy.created
    assert a_copy.id != b_copy.id  # not de-duplicated across projects
    for ranking in RANKINGS:
        for query in ("fault F-2291 sea pump valve", "cat dog garden"):
            found = {
                hit.document_id
                for hit in library.search(query, 5, ranking=ranking, tenant=tenant("b"))
            }
            assert found <= {b_copy.id}, (ranking, query)
            assert library.search(query, 5, ranking=ranking, tenant=tenant("c")) == []
        in_a = library.search("fault F-2291 sea pump", 5, ranking=ranking, tenant=tenant("a"))
        assert "pump" in {hit.document_id for hit in in_a}
    assert library.search("sea pump", 5, document_ids=["pump"], tenant=tenant("b")) == []
    assert library.get("pump", tenant=tenant("b")) is None
    assert library.get("pump", tenant=tenant("a")).project == "a"
    rows, total = library.list(tenant=tenant("b"))
    assert ([row.id for row in rows], total) == ([b_copy.id], 1)
    assert library.list(tenant=tenant("a"))[1] == 2
    assert library.delete("pump", tenant=tenant("b")) is None
    assert library.get("pump", tenant=tenant("a")) is not None
    assert library.delete(b_copy.id, tenant=tenant("b")) is not None
    assert library.get(a_copy.id, tenant=tenant("a")) is not None  # the other copy stays


def objects_stay_in_their_project(library: Library, objects: RagObjects) -> None:
    """Files, vector stores (their files and batches) and stored responses: another project's id
    is as unknown as a made-up one, and nothing of it changes."""
    [document] = library.ingest([SECRET], tenant=tenant("a"))
    a, b = objects.in_project(tenant("a")), objects.in_project(tenant("b"))
    a.files.add("file-a", document.id, True, "secret.txt", "assistants", b"secret bytes")
    store = a.vector_stores.create("docs", None, {}, None, [Attachment("file-a", {"k": "v"})])
    batch = a.vector_stores.create_batch(store.id, [Attachment("file-a", {"k": "v"})])
    a.responses.save(StoredResponse("resp_a", {"output": "secret"}, [{"role": "user"}]))

    assert b.files.get("file-a") is None and b.files.content("file-a") is None
    assert b.files.page(PageRequest()) == ([], False)
    with pytest.raises(UnknownCursor):
        b.files.page(PageRequest(after="file-a"))
    assert b.files.delete("file-a") == (False, None)
    assert b.files.move_to_document("file-a", "elsewhere", True) is None
    assert b.vector_stores.get(store.id) is None
    assert b.vector_stores.page(PageRequest()) == ([], False)
    assert b.vector_stores.update(store.id, {"name": "mine"}) is None
    assert b.vector_stores.get_batch(store.id, batch.id) is None
    assert b.vector_stores.get_file(store.id, "file-a") is None
    assert b.vector_stores.page_files(store.id, PageRequest()) == ([], False)
    assert b.vector_stores.set_attributes(store.id, "file-a", {"k": "changed"}) is None
    assert b.vector_stores.detach(store.id, "file-a") is False
    assert b.vector_stores.searchable_files([store.id]) == []
    with pytest.raises(UnknownVectorStore):
        b.vector_stores.attach(store.id, [])
    with pytest.raises(UnknownVectorStore):
        b.vector_stores.create_batch(store.id, [])
    own = b.vector_stores.create("mine", None, {}, None, [])
    with pytest.raises(UnknownFiles):
        b.vector_stores.attach(own.id, [Attachment("file-a", {})])
    assert b.vector_stores.delete(store.id) is False
    assert b.responses.get("resp_a") is None and b.responses.delete("resp_a") is False

    assert a.files.content("file-a") == b"secret bytes"
    kept = a.vector_stores.get_file(store.id, "file-a")
    assert kept is not None and kept.attributes == {"k": "v"}
    assert a.vector_stores.get(store.id).name == "docs"
    assert [f.file_id for f in a.vector_stores.searchable_files([store.id, own.id])] == ["file-a"]
    assert a.responses.get("resp_a").body == {"output": "secret"}
    assert [s.id for s in a.vector_stores.page(PageRequest())[0]] == [store.id]


def stored_sizes_are_counted_per_project(library: Library, objects: RagObjects) -> None:
    """Each project's stored bytes: the UTF-8 bytes of its documents' chunk text (not their
    characters) and its files' bytes; a project storing nothing is not listed."""
    text = "Ölpumpe P-7 zählt Tropfen: 3 € je Liter."
    [document] = library.ingest([NewDocument("oil", text)], tenant=tenant("a"))
    library.ingest([SECRET], tenant=tenant("b"))
    objects.in_project(tenant("a")).files.add(
        "file-oil", document.id, False, "oil.txt", "user_data", b"x"
    )
    stored = objects.stored_by_project()
    assert set(stored) == {"a", "b"}
    assert stored["a"]["document_chars"] == len(text)
    assert (stored["a"]["document_bytes"], stored["a"]["file_bytes"]) == (len(text.encode()), 1)
    assert (stored["b"]["document_bytes"], stored["b"]["files"]) == (len(SECRET.text), 0)


def document_ids_are_per_project(library: Library, objects: RagObjects) -> None:
    """Projects `a`, `b` and `default` each hold a document `doc-x` of their own: each ingests,
    gets, lists, searches (every ranking) and files it under the id it gave; the same id again
    with other text is still a conflict within the project; deleting `b`'s leaves the others."""
    texts = {"a": SECRET.text, "b": SAME_TEXT.text, "default": "Tide tables list the harbour."}
    for project, text in texts.items():
        [result] = library.ingest([NewDocument("doc-x", text)], tenant=tenant(project))
        assert (result.id, result.created) == ("doc-x", True), project
        [again] = library.ingest([NewDocument("doc-x", text)], tenant=tenant(project))
        assert (again.id, again.created) == ("doc-x", False), project
        with pytest.raises(DocumentConflict):
            library.ingest([NewDocument("doc-x", f"{text} Changed.")], tenant=tenant(project))
    for project, text in texts.items():
        document = library.get("doc-x", tenant=tenant(project))
        assert (document.id, document.num_chars) == ("doc-x", len(text)), project
        rows, total = library.list(tenant=tenant(project))
        assert ([row.id for row in rows], total) == (["doc-x"], 1), project
        for ranking in RANKINGS:
            hits = library.search(
                text, 3, document_ids=["doc-x"], ranking=ranking, tenant=tenant(project)
            )
            assert [(hit.document_id, hit.text) for hit in hits] == [("doc-x", text)], project
    a, b = objects.in_project(tenant("a")), objects.in_project(tenant("b"))
    assert a.files.add("file-a", "doc-x", True, "a.txt", "assistants", b"a").document_id == "doc-x"
    b.files.add("file-b", "doc-x", True, "b.txt", "assistants", b"b")
    store = a.vector_stores.create("docs", None, {}, None, [Attachment("file-a", {})])
    assert a.files.get("file-a").document_id == "doc-x"
    assert [f.document_id for f in a.vector_stores.searchable_files([store.id])] == ["doc-x"]
    assert b.files.delete("file-b") == (True, "doc-x")  # its upload made the document: drop it
    removed = library.delete("doc-x", tenant=tenant("b"))
    assert removed and {row.document_id for row in removed} == {"doc-x"}
    assert (
        library.get("doc-x", tenant=tenant("b")) is None
        and library.delete("doc-x", tenant=tenant("b")) is None
    )
    assert library.search(SAME_TEXT.text, 3, tenant=tenant("b")) == []
    assert library.get("doc-x", tenant=tenant("a")).num_chars == len(texts["a"])
    assert [hit.document_id for hit in library.search(SECRET.text, 3, tenant=tenant("a"))] == [
        "doc-x"
    ]
    assert library.get("doc-x", tenant=DEFAULT).num_chars == len(texts["default"])
    assert a.vector_stores.get_file(store.id, "file-a").document_id == "doc-x"
