"""Keyword search in the embedded (SQLite) library: it finds what the words name, follows ingest,
delete and restart, is added to a library an older release wrote, and ranks as documented."""

import sqlite3

import pytest

from retriever.db.sqlite_schema import _MIGRATIONS, _SCHEMA
from retriever.library.documents import NewDocument
from retriever.library.facade import STORE_FILE, Library
from retriever.search.ranking import Ranking
from tests.unit.gateway_fakes import CharTokenizer, WordEmbedder
from tests.unit.tenants import DEFAULT

CODE = NewDocument("pump", "The sea pump shows fault F-2291 when its valve sticks in cold weather.")
CALM = NewDocument("calm", "The sea was calm and the sea was grey under a sea of cloud.")
PETS = NewDocument("pets", "A cat and a dog share the garden; the dog digs and the cat naps.")
QUESTION = "pump fault F-2291"
KEYWORDS = Ranking(embedding_weight=0.0, text_weight=1.0)
HYBRID = Ranking(embedding_weight=1.0, text_weight=1.0)


@pytest.fixture
def open_library(tmp_path):
    opened = []

    def open_() -> Library:
        library = Library(tmp_path / "library", CharTokenizer(), WordEmbedder(), chunk_tokens=400)
        opened.append(library)
        return library

    yield open_
    for library in opened:
        library.close()


def ids(hits) -> list[str]:
    return [hit.document_id for hit in hits]


def test_hybrid_ranking_finds_the_code_dense_ranking_misses(open_library):
    library = open_library()
    library.ingest([CODE, CALM, PETS], tenant=DEFAULT)
    # The stand-in embedder sees only cat/dog/sky/sea: like MiniLM on a code, it cannot tell.
    assert ids(library.search(QUESTION, top_k=1, tenant=DEFAULT)) == ["pets"]
    assert ids(library.search(QUESTION, top_k=1, ranking=HYBRID, tenant=DEFAULT)) == ["pump"]
    assert ids(library.search(QUESTION, top_k=3, ranking=KEYWORDS, tenant=DEFAULT)) == ["pump"]


def test_ranking_weights_and_scores_behave_as_documented(open_library):
    library = open_library()
    library.ingest([CODE, CALM, PETS], tenant=DEFAULT)
    dense = library.search(QUESTION, top_k=3, tenant=DEFAULT)
    no_text = library.search(QUESTION, top_k=3, ranking=Ranking(1.0, 0.0), tenant=DEFAULT)
    assert no_text == dense  # text_weight 0: dense ranking, cosine scores
    hybrid = library.search(QUESTION, top_k=3, ranking=HYBRID, tenant=DEFAULT)
    assert ids(hybrid) == ["pump", "pets", "calm"]
    assert 0.98 < hybrid[0].score < 1.0  # second by embedding, first by keyword
    assert hybrid[1].score == pytest.approx(0.5)  # first by embedding only
    leaning = library.search(QUESTION, top_k=1, ranking=Ranking(1.0, 0.01), tenant=DEFAULT)
    assert ids(leaning) == ["pets"]  # the embedding ranking outweighs the keyword one
    kept = library.search(QUESTION, top_k=3, min_score=0.9, ranking=HYBRID, tenant=DEFAULT)
    assert ids(kept) == ["pump"]


def test_keyword_hits_survive_restart_and_go_with_delete(open_library):
    first = open_library()
    first.ingest([CODE, CALM, PETS], tenant=DEFAULT)
    first.close()
    reopened = open_library()
    assert ids(reopened.search("F-2291", top_k=3, ranking=KEYWORDS, tenant=DEFAULT)) == ["pump"]
    assert reopened.delete("pump", tenant=DEFAULT) is not None
    assert reopened.search("F-2291", top_k=3, ranking=KEYWORDS, tenant=DEFAULT) == []
    assert "pump" not in ids(reopened.search(QUESTION, top_k=3, ranking=HYBRID, tenant=DEFAULT))
    reopened.ingest([CODE], tenant=DEFAULT)  # the same text again: new chunks, found again
    assert ids(reopened.search("valves sticking", top_k=3, ranking=KEYWORDS, tenant=DEFAULT)) == [
        "pump"
    ]


def test_query_syntax_characters_are_only_words(open_library):
    library = open_library()
    library.ingest([CODE, CALM], tenant=DEFAULT)
    hostile = 'NEAR(fault "F-2291" OR) AND * ^pump : -valve \' | & !'
    assert ids(library.search(hostile, top_k=2, ranking=KEYWORDS, tenant=DEFAULT))[0] == "pump"
    assert library.search("?! ... --", top_k=2, ranking=KEYWORDS, tenant=DEFAULT) == []


def test_a_library_written_before_keyword_search_gets_its_chunks_indexed(tmp_path):
    path = tmp_path / "library" / STORE_FILE
    path.parent.mkdir()
    legacy = sqlite3.connect(path)
    for statement in _SCHEMA + tuple(s for v in (2, 3, 4) for s in _MIGRATIONS[v]):
        legacy.execute(statement)
    legacy.execute("PRAGMA user_version = 4")
    legacy.execute("INSERT INTO documents VALUES ('pump', 'h', '{}', 'indexed', 0, 1, 20)")
    legacy.execute(
        "INSERT INTO chunks (document_id, chunk_index, text, token_ids) "
        "VALUES ('pump', 0, 'fault F-2291 in the pump', x'01000000')"
    )
    legacy.commit()
    legacy.close()
    library = Library(tmp_path / "library", CharTokenizer(), WordEmbedder())
    try:
        assert ids(library.search("F-2291", top_k=2, ranking=KEYWORDS, tenant=DEFAULT)) == ["pump"]
        assert ids(library.search("F-2291", top_k=2, ranking=HYBRID, tenant=DEFAULT)) == ["pump"]
    finally:
        library.close()


class LengthReranker:
    """Stands in for a cross-encoder: the shorter a text, the better it answers."""

    def scores(self, query, texts):
        return [1 / len(text) for text in texts]


def test_a_reranker_reorders_unless_the_ranking_says_none(tmp_path):
    library = Library(
        tmp_path / "library", CharTokenizer(), WordEmbedder(), reranker=LengthReranker()
    )
    try:
        library.ingest([CODE, CALM, PETS], tenant=DEFAULT)
        plain = ids(
            library.search(
                QUESTION, top_k=3, ranking=Ranking(1.0, 1.0, rerank=False), tenant=DEFAULT
            )
        )
        assert plain == ["pump", "pets", "calm"]  # as without a reranker
        reranked = library.search(QUESTION, top_k=2, ranking=HYBRID, tenant=DEFAULT)
        assert ids(reranked) == ["calm", "pets"]  # shortest first, cut to top_k after reranking
        assert reranked[0].score == pytest.approx(1 / len(CALM.text))  # the reranker's score
    finally:
        library.close()


def test_a_word_most_chunks_hold_still_counts_and_still_finds(open_library):
    library = open_library()
    library.ingest(
        [NewDocument(f"plot{n}", f"Garden plot {n} grows beans.") for n in range(1100)]
        + [NewDocument(f"gnome{n}", f"Gnome {n} stands by the pond.") for n in range(60)]
        + [NewDocument("both", "A gnome stands in the garden."), NewDocument("moon", "Moon.")],
        tenant=DEFAULT,
    )
    # Of the chunks holding the rarer word, the one that also holds the common word is first.
    assert ids(library.search("garden gnome", top_k=1, ranking=KEYWORDS, tenant=DEFAULT)) == [
        "both"
    ]
    # Too few chunks hold the rarer word: chunks holding only the common one come next.
    found = ids(library.search("moon garden", top_k=3, ranking=KEYWORDS, tenant=DEFAULT))
    assert found[0] == "moon" and len(found) == 3
