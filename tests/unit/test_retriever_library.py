"""Library: ingest, search by meaning, restart, delete, and repair after a crash."""

import threading
from pathlib import Path

import numpy as np
import pytest

from retriever import EVERY_PROJECT
from retriever.ingest.chunking import Chunking
from retriever.library.document_store import DocumentConflict
from retriever.library.documents import (
    DuplicateDocumentId,
    EmptyDocument,
    InvalidDocumentId,
    InvalidMetadata,
    NewDocument,
)
from retriever.library.facade import INDEX_FILE, Library
from retriever.search.embed import Embedder
from tests.unit.tenants import DEFAULT

TOKENIZER_DIR = Path(__file__).resolve().parents[2] / "data" / "models" / "smollm2-135m-instruct"
CHUNK_TOKENS = 64

TOWER = """The Eiffel Tower was built between 1887 and 1889 as the entrance arch to the World's Fair
in Paris. Gustave Eiffel's company designed and constructed the wrought-iron lattice structure.

The tower is 330 metres tall, about the height of an 81-storey building. It was the tallest
man-made structure in the world until the Chrysler Building in New York was finished in 1930.

Visitors can climb 674 steps to the second floor or take a lift to the top, where a small
restaurant and observation decks look out over the river Seine."""

PLANTS = """Photosynthesis lets plants turn sunlight, water and carbon dioxide into glucose. The
process takes place in chloroplasts, which contain the green pigment chlorophyll.

Oxygen is released as a by-product of photosynthesis. Almost all of the oxygen in the atmosphere
was produced by photosynthetic organisms over billions of years."""

BREAD = """Sourdough bread rises thanks to a starter of wild yeast and lactic acid bacteria. The
bacteria give the loaf its sour taste, and a long cold proof deepens the flavour.

Bakers feed the starter with flour and water every day to keep it active."""


@pytest.fixture(scope="module")
def tokenizer():
    if not (TOKENIZER_DIR / "tokenizer.json").exists():
        pytest.skip(f"no tokenizer at {TOKENIZER_DIR}")
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(TOKENIZER_DIR)


class CountingEmbedder:
    """The real MiniLM embedder, counting how many texts it embeds."""

    def __init__(self, embedder: Embedder) -> None:
        self.embedder = embedder
        self.texts_embedded = 0

    @property
    def dim(self) -> int:
        return self.embedder.dim

    def embed(self, texts: list[str], batch_size: int = 32) -> np.ndarray:
        self.texts_embedded += len(texts)
        return self.embedder.embed(texts, batch_size)


@pytest.fixture(scope="module")
def minilm() -> Embedder:
    return Embedder()


@pytest.fixture
def embedder(minilm) -> CountingEmbedder:
    return CountingEmbedder(minilm)


@pytest.fixture
def open_library(tmp_path, tokenizer, embedder):
    opened: list[Library] = []

    def open_(kind: str = "flat") -> Library:
        library = Library(tmp_path / "library", tokenizer, embedder, kind, CHUNK_TOKENS)
        opened.append(library)
        return library

    yield open_
    for library in opened:
        library.close()


def corpus() -> list[NewDocument]:
    return [
        NewDocument("tower", TOWER, {"title": "Eiffel Tower"}),
        NewDocument("plants", PLANTS),
        NewDocument(None, BREAD, {"source": "kitchen"}),
    ]


def test_embedder_gives_unit_vectors(minilm):
    vectors = minilm.embed(["a cat", "a dog", "stock prices"])
    assert vectors.shape == (3, minilm.dim) == (3, 384)
    assert vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, rtol=1e-5)
    assert minilm.embed([]).shape == (0, 384)


@pytest.mark.parametrize("kind", ["flat", "hnsw"])
def test_search_finds_the_chunk_that_answers_a_paraphrase(open_library, kind):
    library = open_library(kind)
    results = library.ingest(corpus(), tenant=DEFAULT)
    assert [(r.id, r.created, r.status) for r in results[:2]] == [
        ("tower", True, "indexed"),
        ("plants", True, "indexed"),
    ]
    assert results[0].num_chunks == 3
    hits = library.search(
        "What is the height of the Paris tower in metres?", top_k=3, tenant=DEFAULT
    )
    assert hits[0].document_id == "tower"
    assert "330 metres" in hits[0].text
    assert hits[0].token_ids == library.tokenizer.encode(hits[0].text, add_special_tokens=False)
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
    hits = library.search(
        "Which gas do leaves give off when they make sugar from light?", 1, tenant=DEFAULT
    )
    assert hits[0].document_id == "plants"
    assert "Oxygen is released" in hits[0].text


def test_search_filters_by_document_and_score(open_library):
    library = open_library()
    bread_id = library.ingest(corpus(), tenant=DEFAULT)[2].id
    hits = library.search(
        "How tall is the tower?", top_k=5, document_ids=[bread_id], tenant=DEFAULT
    )
    assert hits and {hit.document_id for hit in hits} == {bread_id}
    assert (
        library.search("How tall is the tower?", top_k=5, document_ids=["nope"], tenant=DEFAULT)
        == []
    )
    assert library.search("How tall is the tower?", top_k=5, min_score=0.99, tenant=DEFAULT) == []
    with pytest.raises(ValueError, match="query is empty"):
        library.search("  ", top_k=1, tenant=DEFAULT)


def test_same_content_is_not_stored_twice(open_library, embedder):
    library = open_library()
    library.ingest(corpus(), tenant=DEFAULT)
    embedded, vectors = embedder.texts_embedded, len(library.index)
    again = library.ingest(
        [NewDocument("copy", TOWER.replace("\n", "\r\n") + "\n\n")], tenant=DEFAULT
    )
    assert [(r.id, r.created, r.status) for r in again] == [("tower", False, "indexed")]
    assert (embedder.texts_embedded, len(library.index)) == (embedded, vectors)
    assert library.list(tenant=DEFAULT)[1] == 3


def test_the_same_text_chunked_another_way_is_another_document(open_library):
    library = open_library()
    default = library.ingest([NewDocument("tower", TOWER)], tenant=DEFAULT)[0]
    overlapping = Chunking(CHUNK_TOKENS, CHUNK_TOKENS // 2)
    static = library.ingest([NewDocument(None, TOWER, chunking=overlapping)], tenant=DEFAULT)[0]
    again = library.ingest([NewDocument(None, TOWER, chunking=overlapping)], tenant=DEFAULT)[0]
    assert static.created and static.id != default.id
    assert (again.id, again.created) == (static.id, False)
    assert static.num_chunks > default.num_chunks  # the overlap leaves less new text per chunk
    assert library.chunking_of(library.get(default.id, tenant=DEFAULT).content_hash) == Chunking(
        CHUNK_TOKENS
    )
    assert library.chunking_of(library.get(static.id, tenant=DEFAULT).content_hash) == overlapping
    # asking for the default chunking explicitly finds the document chunked that way
    same = library.ingest(
        [NewDocument(None, TOWER, chunking=Chunking(CHUNK_TOKENS))], tenant=DEFAULT
    )[0]
    assert (same.id, same.created) == ("tower", False)


@pytest.mark.parametrize(
    ("documents", "error"),
    [
        ([NewDocument("a", "fine"), NewDocument("b", " \n ")], EmptyDocument),
        ([NewDocument("a", "one"), NewDocument("a", "two")], DuplicateDocumentId),
        ([NewDocument("has space", "text")], InvalidDocumentId),
        ([NewDocument("a", "text", {"when": object()})], InvalidMetadata),
    ],
)
def test_invalid_batches_store_nothing(open_library, documents, error):
    library = open_library()
    with pytest.raises(error, match=r"documents\[\d\]"):
        library.ingest(documents, tenant=DEFAULT)
    assert library.list(tenant=DEFAULT) == ([], 0)
    assert len(library.index) == 0


def test_reusing_an_id_for_new_content_conflicts(open_library):
    library = open_library()
    library.ingest([NewDocument("a", "The first text.")], tenant=DEFAULT)
    with pytest.raises(DocumentConflict):
        library.ingest(
            [NewDocument("fresh", "Other text."), NewDocument("a", "Changed text.")], tenant=DEFAULT
        )
    assert [document.id for document in library.list(tenant=DEFAULT)[0]] == ["a"]


def test_restart_restores_documents_and_vectors(open_library, embedder):
    library = open_library()
    library.ingest(corpus(), tenant=DEFAULT)
    query = "What makes sourdough taste sour?"
    before = library.search(query, top_k=4, tenant=DEFAULT)
    documents = library.list(tenant=DEFAULT)
    library.close()
    embedded = embedder.texts_embedded
    reopened = open_library()
    assert embedder.texts_embedded == embedded
    assert reopened.list(tenant=DEFAULT) == documents
    assert reopened.get("tower", tenant=DEFAULT).metadata == {"title": "Eiffel Tower"}
    after = reopened.search(query, top_k=4, tenant=DEFAULT)
    assert [(h.chunk_id, h.text) for h in after] == [(h.chunk_id, h.text) for h in before]


def test_delete_removes_a_document_from_search(open_library):
    library = open_library()
    library.ingest(corpus(), tenant=DEFAULT)
    removed = library.delete("tower", tenant=DEFAULT)
    assert [row.chunk_index for row in removed] == [0, 1, 2]
    assert all(row.token_ids for row in removed)
    assert library.get("tower", tenant=DEFAULT) is None
    assert library.delete("tower", tenant=DEFAULT) is None
    hits = library.search("How tall is the Eiffel Tower?", top_k=10, tenant=DEFAULT)
    assert hits and "tower" not in {hit.document_id for hit in hits}
    library.close()
    reopened = open_library()
    assert "tower" not in {
        hit.document_id for hit in reopened.search("Eiffel Tower", top_k=10, tenant=DEFAULT)
    }


def index_file_unwritable(library: Library, monkeypatch) -> None:
    """Every write of the index file fails from now on, as if the server died before it."""

    def crash(path: Path) -> None:
        raise OSError("simulated crash before the index was saved")

    monkeypatch.setattr(library.index, "save", crash)


def test_an_ingest_whose_index_file_was_never_written_is_repaired_on_reopen(
    open_library, embedder, monkeypatch
):
    library = open_library()
    library.ingest([NewDocument("plants", PLANTS)], tenant=DEFAULT)
    library.close()
    library = open_library()
    index_file_unwritable(library, monkeypatch)
    [acknowledged] = library.ingest([NewDocument("tower", TOWER)], tenant=DEFAULT)
    assert acknowledged.status == "indexed"
    library.close()
    embedded = embedder.texts_embedded
    reopened = open_library()
    assert embedder.texts_embedded - embedded == reopened.get("tower", tenant=DEFAULT).num_chunks
    assert reopened.get("tower", tenant=DEFAULT).status == "indexed"
    assert (
        reopened.search("How tall is the Eiffel Tower?", top_k=1, tenant=DEFAULT)[0].document_id
        == "tower"
    )
    assert reopened.index.ids() == reopened.store.chunk_ids(project=EVERY_PROJECT)


def test_a_delete_whose_index_file_was_never_written_is_repaired_on_reopen(
    open_library, monkeypatch
):
    library = open_library()
    library.ingest(corpus(), tenant=DEFAULT)
    index_file_unwritable(library, monkeypatch)
    assert library.delete("tower", tenant=DEFAULT) is not None
    library.close()
    reopened = open_library()
    assert reopened.index.ids() == reopened.store.chunk_ids(project=EVERY_PROJECT)
    hits = reopened.search("How tall is the Eiffel Tower?", top_k=10, tenant=DEFAULT)
    assert "tower" not in {hit.document_id for hit in hits}


def test_lost_or_mismatched_index_is_rebuilt(open_library, embedder):
    library = open_library()
    bread_id = library.ingest(corpus(), tenant=DEFAULT)[2].id
    chunk_ids = library.store.chunk_ids(project=EVERY_PROJECT)
    library.close()
    (library.data_dir / INDEX_FILE).write_bytes(b"not an index")
    assert open_library().index.ids() == chunk_ids
    switched = open_library("hnsw")
    assert (switched.index.kind, switched.index.ids()) == ("hnsw", chunk_ids)
    assert switched.search("sourdough starter", top_k=1, tenant=DEFAULT)[0].document_id == bread_id


def test_concurrent_ingests_and_searches(open_library):
    library = open_library()
    library.ingest([NewDocument("plants", PLANTS)], tenant=DEFAULT)
    errors: list[BaseException] = []

    def run(action) -> None:
        try:
            action()
        except BaseException as error:
            errors.append(error)

    actions = [
        lambda: library.ingest([NewDocument("tower", TOWER)], tenant=DEFAULT),
        lambda: library.ingest([NewDocument("bread", BREAD)], tenant=DEFAULT),
        *[lambda: library.search("photosynthesis", top_k=2, tenant=DEFAULT) for _ in range(4)],
    ]
    threads = [threading.Thread(target=run, args=(action,)) for action in actions]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert library.index.ids() == library.store.chunk_ids(project=EVERY_PROJECT)
    assert library.list(tenant=DEFAULT)[1] == 3
