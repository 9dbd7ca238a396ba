"""Metadata filters on library search and the character spans chunks are cited by, written once
and run on both backends (`test_retriever_filters_spans` on SQLite,
`test_retriever_pg_filters_spans` on PostgreSQL)."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from functools import partial
from typing import Any

from gateway.openai.filters import matches, parse_filter
from retriever.ingest.chunking import Chunking
from retriever.library.documents import Hit, MetadataCondition, NewDocument
from retriever.library.facade import Library
from tests.unit.project_scenarios import RANKINGS
from tests.unit.tenants import tenant

QUERY = "cat dog"
OPS = {"type": "eq", "key": "team", "value": "ops"}
CRLF_TEXT = "\r\n\r\n".join(
    f"Section {n}: the cat watched the sea while the dog slept under the sky.\r\n"
    f"Line two of section {n} names the dog and the cat once more."
    for n in range(6)
)
"""Several chunks at 64 tokens a chunk, written with Windows line ends."""
EXTRACTED = CRLF_TEXT.replace("\r\n", "\n")
"""`CRLF_TEXT` as the library keeps it: the text its chunks' spans index."""
CHUNKINGS = (Chunking(64), Chunking(64, 16))


def condition(raw: dict[str, Any]) -> MetadataCondition:
    """A filter as a request sends it, parsed and applied as chat's ``retrieval.filters`` is."""
    return partial(matches, parse_filter(raw))


def filters_choose_documents_before_top_k(library: Library) -> None:
    """Two documents of forty pass the filter and answer the query worse than the rest: a search
    for two still finds exactly those, on every ranking. Documents without the attribute pass
    only `ne`/`nin`; another project's documents never pass."""
    a = tenant("a")
    crowd = [
        NewDocument(
            f"dev-{n}", f"Note {n}: the cat and the dog sleep, cat and dog.", {"team": "dev"}
        )
        for n in range(38)
    ]
    ops = [
        NewDocument(
            f"ops-{n}",
            f"Runbook {n}: the sky over the sea, and one cat.",
            {"team": "ops", "year": 2024 + n},
        )
        for n in range(2)
    ]
    bare = NewDocument("bare", "A dog and a cat by the sea.")
    library.ingest([*crowd, *ops, bare], tenant=a)
    library.ingest([NewDocument("theirs", "cat dog cat dog", {"team": "ops"})], tenant=tenant("b"))
    for ranking in RANKINGS:
        unfiltered = library.search(QUERY, 2, ranking=ranking, tenant=a)
        assert not {hit.document_id for hit in unfiltered} & {"ops-0", "ops-1"}, ranking
        found = library.search(QUERY, 2, ranking=ranking, tenant=a, where=condition(OPS))
        assert sorted(hit.document_id for hit in found) == ["ops-0", "ops-1"], ranking
    newer = {"type": "and", "filters": [OPS, {"type": "gte", "key": "year", "value": 2025}]}
    assert ids(library.search(QUERY, 5, tenant=a, where=condition(newer))) == ["ops-1"]
    later = {"type": "gt", "key": "year", "value": 2030}
    assert library.search(QUERY, 5, tenant=a, where=condition(later)) == []
    not_ops = {"type": "ne", "key": "team", "value": "ops"}
    everyone_else = library.search(QUERY, 50, tenant=a, where=condition(not_ops))
    assert sorted(ids(everyone_else)) == sorted([d.id for d in crowd] + ["bare"])
    either = {"type": "or", "filters": [OPS, {"type": "in", "key": "team", "value": ["qa"]}]}
    within = library.search(QUERY, 5, None, ["ops-1", "dev-0"], tenant=a, where=condition(either))
    assert ids(within) == ["ops-1"]
    assert ids(library.search(QUERY, 5, tenant=tenant("b"), where=condition(OPS))) == ["theirs"]
    assert library.search(QUERY, 5, tenant=tenant("c"), where=condition(OPS)) == []


def spans_slice_the_extracted_text(library: Library, reopen: Callable[[], Library]) -> None:
    """Every retrieved chunk is `text[start_char:end_char]` of its document's extracted text
    (line ends unified), with and without overlap, and still after the library is reopened."""
    documents = [
        NewDocument(f"spans-{c.overlap_tokens}", CRLF_TEXT, {"kind": "spans"}, c) for c in CHUNKINGS
    ]
    library.ingest(documents, tenant=tenant("a"))
    before = _every_chunk(library, len(EXTRACTED))
    reopened = reopen()
    assert _every_chunk(reopened, len(EXTRACTED)) == before


Citation = tuple[str, int, int | None, int | None]
"""A retrieved chunk's document id, chunk index and span."""


def _every_chunk(library: Library, num_chars: int) -> list[Citation]:
    """Every chunk of the two documents, each checked against the text, in document order."""
    kind = condition({"type": "eq", "key": "kind", "value": "spans"})
    hits = library.search(QUERY, 64, tenant=tenant("a"), where=kind)
    for hit in hits:
        assert hit.start_char is not None and hit.end_char is not None
        assert EXTRACTED[hit.start_char : hit.end_char] == hit.text
        assert 0 <= hit.start_char < hit.end_char <= num_chars
    cited = sorted((h.document_id, h.chunk_index, h.start_char, h.end_char) for h in hits)
    for document_id in ("spans-0", "spans-16"):
        stored = library.get(document_id, tenant=tenant("a"))
        assert stored is not None and stored.num_chars == num_chars
        indexes = [index for cited_id, index, _, _ in cited if cited_id == document_id]
        assert indexes == list(range(stored.num_chunks)), document_id
    overlapped = [(start, end) for doc, _, start, end in cited if doc == "spans-16"]
    assert any(start < end for (_, end), (start, _) in itertools.pairwise(overlapped))
    return cited


def ids(hits: list[Hit]) -> list[str]:
    """The documents of `hits`, best first."""
    return [hit.document_id for hit in hits]
