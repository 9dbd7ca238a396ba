"""A keyword search over SQLite's FTS5 index that stays fast in a large library.

FTS5 ranks by BM25 (`bm25()`), which for every chunk the query matches reads the chunk's length
and walks the positions of each query word in it: about 2 microseconds a chunk. A question's
ordinary words ("song", "first", "played") are each in 5-30% of the chunks of a large library,
and a query matches any of its words, so at 100K chunks a search scored tens of thousands of
chunks to return 50 (p95 over 90 ms on one core, docs/benchmarks.md).

So a word held by more than `COMMON_SHARE` of the chunks (and more than `COMMON_MIN` chunks) only
adds to a score: the chunks scored are those holding one of the query's other words, each still
scored by BM25 over all the query's words. A chunk holding only common words is left out, which
changes nothing while enough chunks hold a rarer word (such a chunk scores below them); when
fewer than asked for do, the search is run over every match. At 100K stand-in chunks the 50 found
were the same as the full search's for 40 questions of 40.
"""

from __future__ import annotations

from typing import Any

from retriever.library.kv_presence import Executor
from retriever.search.keywords import fts5_match

COMMON_SHARE = 0.05
"""Share of the chunks above which a word is common (BM25 weighs it under a third of a word
held by 0.1% of them)."""
COMMON_MIN = 1000
"""Chunks a word must be in to be common: a small library scores every match."""
_HOLDING_RARE = " AND +chunks_fts.rowid IN (SELECT rowid FROM chunks_fts WHERE chunks_fts MATCH ?)"
"""Only chunks holding a rarer word (`+` keeps SQLite from handing FTS5 the set as rowids to
look up one by one)."""


def fts5_search(
    connection: Executor, terms: list[str], limit: int, conditions: str, parameters: list[Any]
) -> list[tuple[int, float]]:
    """Up to `limit` chunks holding any of `terms` and meeting `conditions` (` AND ...` on a row
    of `chunks`, with their `parameters`) with their BM25 score, best first (negated: higher is
    better)."""
    rare = _rare_terms(connection, terms)
    if rare and len(rare) < len(terms):
        rows = _ranked(connection, terms, limit, conditions, parameters, rare)
        if len(rows) == limit:
            return rows
    return _ranked(connection, terms, limit, conditions, parameters, None)


def _ranked(
    connection: Executor,
    terms: list[str],
    limit: int,
    conditions: str,
    parameters: list[Any],
    rare: list[str] | None,
) -> list[tuple[int, float]]:
    """The search, over the chunks holding one of `rare` when given. Chunks are checked against
    `conditions` one by one as FTS5 matches them (`CROSS JOIN` keeps FTS5 the outer loop): a set
    of allowed rowids would be handed to FTS5 as one full-text lookup per rowid."""
    join = " CROSS JOIN chunks ON chunks.id = chunks_fts.rowid" if conditions else ""
    if rare is not None:
        conditions, parameters = conditions + _HOLDING_RARE, [*parameters, fts5_match(rare)]
    rows = connection.execute(
        f"SELECT chunks_fts.rowid, bm25(chunks_fts) AS score FROM chunks_fts{join} "
        f"WHERE chunks_fts MATCH ?{conditions} ORDER BY score, chunks_fts.rowid LIMIT ?",
        (fts5_match(terms), *parameters, limit),
    ).fetchall()
    return [(int(row[0]), -float(row[1])) for row in rows]


def _rare_terms(connection: Executor, terms: list[str]) -> list[str]:
    """`terms` but the common ones; each is counted only up to where it turns common."""
    total = connection.execute("SELECT count(*) FROM chunks").fetchone()[0]
    common = max(COMMON_MIN, int(total * COMMON_SHARE))
    if total <= common or len(terms) < 2:
        return terms
    counted = "SELECT count(*) FROM (SELECT 1 FROM chunks_fts WHERE chunks_fts MATCH ? LIMIT ?)"
    return [
        term
        for term in terms
        if connection.execute(counted, (fts5_match([term]), common + 1)).fetchone()[0] <= common
    ]
