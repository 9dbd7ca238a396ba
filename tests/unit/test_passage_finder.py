"""The pasted-passage finder against a brute-force substring search, and the bounded index that
feeds it."""

from __future__ import annotations

from itertools import pairwise
from types import SimpleNamespace

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gateway.rag.passage_finder import (
    WINDOW,
    Occurrence,
    anchor_of,
    non_overlapping,
    occurrences,
    passage_key,
)
from gateway.rag.passage_index import FoundPassage, KnownPassages, PassageIndex
from retriever import LibraryUnavailable

BASE = (
    "The harbour museum opened in a former customs house and holds ship models, navigation "
    "instruments and paintings of local vessels. A river delta forms where a river meets a "
    "slower body of water and drops the sediment it carries."
)


def anchors_of(passages: list[str]) -> dict[int, set]:
    anchors: dict[int, set] = {}
    for text in passages:
        anchor = anchor_of(text)
        if anchor is not None:
            anchors.setdefault(anchor, set()).add(passage_key(text))
    return anchors


def brute_force(text: str, passages: list[str]) -> set[tuple[int, int]]:
    """Every (start, end) where a passage of at least WINDOW characters stands in ``text``."""
    found = set()
    for passage in passages:
        if len(passage) < WINDOW:
            continue
        start = text.find(passage)
        while start != -1:
            found.add((start, start + len(passage)))
            start = text.find(passage, start + 1)
    return found


# Passages over a two-letter alphabet sharing long prefixes: many share an anchor, many occur
# overlapping or inside one another, and most of the text matches no passage.
letters = st.text(alphabet="ab", min_size=0, max_size=40)
passages_strategy = st.lists(
    st.tuples(st.integers(WINDOW - 8, WINDOW + 30), letters).map(
        lambda cut: ("ab" * WINDOW)[: cut[0]] + cut[1]
    ),
    min_size=1,
    max_size=8,
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(passages=passages_strategy, data=st.data())
def test_every_occurrence_is_found_as_a_substring_search_finds_it(
    passages: list[str], data: st.DataObject
) -> None:
    pieces = data.draw(st.lists(st.one_of(st.sampled_from(passages), letters), max_size=10))
    text = "".join(pieces)
    found = occurrences(text, anchors_of(passages))
    assert {(hit.start, hit.end) for hit in found} == brute_force(text, passages)
    assert all(text[hit.start : hit.end] in passages for hit in found)


@settings(max_examples=100, deadline=None)
@given(passages=passages_strategy, data=st.data())
def test_the_chunks_are_the_leftmost_longest_occurrences_that_do_not_overlap(
    passages: list[str], data: st.DataObject
) -> None:
    text = "".join(data.draw(st.lists(st.one_of(st.sampled_from(passages), letters), max_size=8)))
    every = brute_force(text, passages)
    chosen = non_overlapping(occurrences(text, anchors_of(passages)))
    spans = [(hit.start, hit.end) for hit in chosen]
    assert all(first[1] <= second[0] for first, second in pairwise(spans))
    for start, end in every - set(spans):  # each left out overlaps a chunk starting no later
        assert any(s <= start < e and (s, e) != (start, end) for s, e in spans)
    for start, end in spans:  # no longer passage starts where a chunk does
        assert all(e <= end for s, e in every if s == start)


def test_passages_are_found_anywhere_with_no_separator_and_after_misses() -> None:
    first, second = BASE[:100], BASE[50:190]
    text = "noise" + first + second + "tail " + first
    found = occurrences(text, anchors_of([first, second, "too short to find"]))
    assert [(hit.start, hit.end) for hit in found] == [
        (5, 105),
        (105, 245),
        (250, 350),
    ]


def test_a_passage_that_only_starts_like_another_is_not_found() -> None:
    passage = BASE[:120]
    text = "intro " + passage[:100] + " and then something else entirely different here."
    assert occurrences(text, anchors_of([passage])) == []


def test_an_index_keeps_the_most_recently_sent_passages() -> None:
    index = PassageIndex(max_passages=2)
    texts = [f"{n} " + BASE for n in range(3)]
    for n, text in enumerate(texts):
        assert index.add(n, text)
    index.add(1, texts[1])  # sent again: now the newest
    index.add(3, "3 " + BASE)
    assert index.owners() == {1, 3}
    assert [hit.start for hit in index.find(texts[0] + texts[1])] == [len(texts[0])]
    assert not index.add(4, "short")
    assert PassageIndex(max_passages=0).add(0, BASE) is False


def test_a_passage_held_by_two_owners_stays_until_both_are_gone() -> None:
    index = PassageIndex()
    index.add("a", BASE)
    index.add("b", BASE)
    index.discard(["a"])
    assert len(index.find(BASE)) == 1
    index.discard(["b"])
    assert index.find(BASE) == []


class FakeLibrary:
    """The two things the passage index reads of a library: its index's ids and chunk rows."""

    def __init__(self, texts: dict[int, str]) -> None:
        self.texts = texts
        self.reads: list[list[int]] = []
        self.index = SimpleNamespace(ids=lambda: set(self.texts))
        self.store = SimpleNamespace(chunks_for=self._chunks_for)
        self.down = False

    def _chunks_for(self, ids: list[int], *, project: str | None) -> list[SimpleNamespace]:
        assert project is None, "the index holds every project's chunks"
        if self.down:
            raise LibraryUnavailable("document library unavailable: test")
        self.reads.append(list(ids))
        return [SimpleNamespace(id=i, text=self.texts[i]) for i in ids if i in self.texts]


def test_library_chunks_follow_the_index_and_are_read_once() -> None:
    chunk, document = "chunk " + BASE, "document " + BASE
    library = FakeLibrary({7: chunk, 8: "short"})
    known = KnownPassages(max_sent=10)
    known.remember([document], "")
    known.sync_library(library)  # type: ignore[arg-type]
    known.sync_library(library)  # type: ignore[arg-type]
    assert library.reads == [[7, 8]]
    text = "Context:\n" + document + "\n\n" + chunk + "\nQuestion?"
    assert known.find(text, "", None) == [
        FoundPassage(9, 9 + len(document), "documents"),
        FoundPassage(11 + len(document), 11 + len(document) + len(chunk), "library"),
    ]
    del library.texts[7]
    known.sync_library(library)  # type: ignore[arg-type]
    assert [hit.origin for hit in known.find(text, "", None)] == ["documents"]


def test_a_chunk_both_sent_and_in_the_library_counts_once_as_the_library_s() -> None:
    library = FakeLibrary({1: BASE})
    known = KnownPassages(max_sent=10)
    known.remember([BASE], "")
    known.sync_library(library)  # type: ignore[arg-type]
    assert known.find(BASE, "", None) == [FoundPassage(0, len(BASE), "library")]


def test_an_unreachable_library_keeps_what_was_filed() -> None:
    library = FakeLibrary({1: BASE})
    known = KnownPassages(max_sent=10)
    known.sync_library(library)  # type: ignore[arg-type]
    library.texts[2] = "other " + BASE
    library.down = True
    known.sync_library(library)  # type: ignore[arg-type]
    assert [hit.origin for hit in known.find(BASE, "", None)] == ["library"]
    library.down = False
    known.sync_library(library)  # type: ignore[arg-type]
    assert len(known.find("other " + BASE, "", None)) == 1


def test_another_project_s_passages_are_never_found() -> None:
    chunk, document = "chunk " + BASE, "document " + BASE
    library = FakeLibrary({7: chunk})
    known = KnownPassages(max_sent=10)
    known.remember([document], "salt-of-a")
    known.sync_library(library)  # type: ignore[arg-type]
    text = document + "\n" + chunk
    assert [hit.origin for hit in known.find(text, "salt-of-a", {7})] == ["documents", "library"]
    assert known.find(text, "salt-of-b", set()) == []
    assert [hit.origin for hit in known.find(text, "salt-of-b", {7})] == ["library"]


def test_occurrence_order_is_by_start_then_longest() -> None:
    key = passage_key(BASE)
    hits = [Occurrence(3, 10, key), Occurrence(0, 5, key), Occurrence(0, 9, key)]
    assert non_overlapping(hits) == [Occurrence(0, 9, key)]
