"""The words of a keyword search, and the query each database's full-text index takes.

Dense embeddings miss what a query names exactly: a code, a part number, a rare name. The
library's keyword search asks the database's own full-text index for those words (SQLite's FTS5,
ranked by BM25; PostgreSQL's tsvector, ranked by `ts_rank`), which the database keeps in the
transaction that stores or deletes the chunks. A query is reduced here to its words, any of which
may match (OR), so no character a user types reaches either database's query syntax.
"""

from __future__ import annotations

import re

MAX_TERMS = 64
"""Words of a query searched for; a longer question keeps its first ones."""
_WORD = re.compile(r"\w+")


def keyword_terms(query: str) -> list[str]:
    """The distinct words of `query`, lower-cased, in order of first appearance."""
    terms = dict.fromkeys(word.lower() for word in _WORD.findall(query))
    return list(terms)[:MAX_TERMS]


def fts5_match(terms: list[str]) -> str:
    """An FTS5 MATCH expression for any of `terms`, each quoted as a string (no operators)."""
    return " OR ".join('"' + term.replace('"', '""') + '"' for term in terms)


def tsquery_text(terms: list[str]) -> str:
    """`to_tsquery` input for any of `terms` (words of letters, digits and `_` only)."""
    return " | ".join(terms)
