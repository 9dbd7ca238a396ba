"""The words of a keyword search, and the query each database's full-text index takes.

Dense embeddings miss what a query names exactly: a code, a part number, a rare name. The
library's keyword search asks the database's own full-text index for those words (SQLite's FTS5,
ranked by BM25; PostgreSQL's tsvector, ranked by `ts_rank`), which the database keeps in the
transaction that stores or deletes the chunks. A query is reduced here to its words, any of which
may match (OR), so no character a user types reaches either database's query syntax.

The words every text is full of ("the", "of", "what") are left out, as PostgreSQL's English
configuration leaves them out of its tsvectors. They barely move a BM25 ranking (their inverse
document frequency is near 0), but an OR query must score every chunk holding any of its words:
with them, nearly every chunk of the library, which made a keyword search at 100K chunks several
times slower than the dense search (see docs/benchmarks.md, search latency).
"""

from __future__ import annotations

import re

MAX_TERMS = 64
"""Words of a query searched for; a longer question keeps its first ones."""
_WORD = re.compile(r"\w+")
_STOP_WORD_LIST = """
    a about above after again against all am an and any are as at be because been before being
    below between both but by can could did do does doing down during each few for from further
    had has have having he her here hers herself him himself his how i if in into is it its
    itself just me more most my myself no nor not now of off on once only or other our ours
    ourselves out over own same she should so some such than that the their theirs them
    themselves then there these they this those through to too under until up very was we were
    what when where which while who whom why will with would you your yours yourself yourselves
    s t d ll m re ve
"""
STOP_WORDS = frozenset(_STOP_WORD_LIST.split())
"""Function words of English, searched for by no one, and what a word splits off an apostrophe
("Charlotte's", "don't", "we'll"): at 100K chunks "s" alone was in 69% of them, where BM25 gives
it no weight at all (FTS5 floors the rarity of a word in over half the chunks near 0)."""


def keyword_terms(query: str) -> list[str]:
    """The distinct words of `query` but stop words, lower-cased, in order of first appearance."""
    words = (word.lower() for word in _WORD.findall(query))
    terms = dict.fromkeys(word for word in words if word not in STOP_WORDS)
    return list(terms)[:MAX_TERMS]


def fts5_match(terms: list[str]) -> str:
    """An FTS5 MATCH expression for any of `terms`, each quoted as a string (no operators)."""
    return " OR ".join('"' + term.replace('"', '""') + '"' for term in terms)


def tsquery_text(terms: list[str]) -> str:
    """`to_tsquery` input for any of `terms` (words of letters, digits and `_` only)."""
    return " | ".join(terms)
