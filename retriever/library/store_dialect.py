"""What the document store does differently on SQLite and on PostgreSQL, so that its SQL is written
once (`retriever.library.document_store`).

Both databases take the store's SQL with `?` placeholders: SQLite's own `ObjectDatabase`, and
PostgreSQL through `QmarkDatabase`, the adapter OpenAI's objects use too. What is left differs
here: how a list is bound (`json_each` or `ANY`), which column keeps insertion order, how a keyword
search asks the full-text index (FTS5 and BM25, or tsvector and `ts_rank`), and what the
shared library adds on PostgreSQL: chunks keep their embedding (documents are stored `indexed` at
once, their vectors committed with them), adds and deletes take the library's write lock and log
their change for the replicas' indexes (`retriever.library.changelog`), and precompute work is
handed out with row locks and a lease, so each chunk's KV is computed by one replica and the
claims of a replica that died expire.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from retriever.db.postgres import PgDatabase, QmarkConnection, QmarkDatabase
from retriever.db.sqlite import ObjectDatabase
from retriever.library import changelog
from retriever.library.changelog import ChangeKind
from retriever.library.fts5_search import fts5_search
from retriever.library.kv_presence import Executor
from retriever.library.records import CHUNK_COLUMNS, CHUNK_IN_PROJECT
from retriever.search.keywords import tsquery_text

CLAIM_LEASE_S = 120
"""How long a replica's claim on a chunk to precompute lasts; after that another may take it."""
CLAIM_ORDER = "ORDER BY kv_stale, id LIMIT ?"
"""Chunks never precomputed first, then stale ones; oldest first."""


class StoreDialect:
    """The embedded store's ways, on SQLite: one server per database file, which keeps the
    vectors in its own index file; `PostgresDialect` changes what the shared library needs."""

    keeps_vectors = False
    insertion_order = "rowid"
    release_claim = ""

    def __init__(self, database: ObjectDatabase | QmarkDatabase) -> None:
        self.database = database

    def any_of(self, column: str, values: Sequence[Any]) -> tuple[str, Any]:
        """A condition that `column` is one of `values`, and its one parameter."""
        return f"{column} IN (SELECT value FROM json_each(?))", json.dumps(list(values))

    def lock_writes(self, connection: Executor) -> None:
        """Nothing: a write transaction (`BEGIN IMMEDIATE`) is already the only writer."""

    def log_change(
        self, connection: Executor, kind: ChangeKind, documents: list[str], chunks: list[int]
    ) -> None:
        """Nothing: no replica follows an embedded store."""

    def keyword_search(
        self,
        connection: Executor,
        terms: list[str],
        limit: int,
        document_ids: Sequence[str] | None,
        project: str | None,
    ) -> list[tuple[int, float]]:
        """Up to `limit` chunks holding any of `terms` (within `document_ids` and `project`'s
        documents when given) with their BM25 score, best first (`fts5_search`)."""
        conditions, parameters = self._chunk_conditions(document_ids, project)
        return fts5_search(connection, terms, limit, conditions, parameters)

    def _chunk_conditions(
        self, document_ids: Sequence[str] | None, project: str | None
    ) -> tuple[str, list[Any]]:
        """` AND ...` conditions on a row of `chunks` for a keyword search, and their
        parameters; empty when the search is not restricted."""
        conditions, parameters = "", []
        if project is not None:
            conditions += f" AND {CHUNK_IN_PROJECT}"
            parameters.append(project)
        if document_ids is not None:
            condition, ids = self.any_of("document_id", document_ids)
            conditions += f" AND {condition}"
            parameters.append(ids)
        return conditions, parameters

    def claim(self, connection: Executor, condition: str, limit: int, claimant: str) -> list[Any]:
        """Chunks matching `condition` as CHUNK_COLUMNS plus `kv_stale`: with one server per
        database there is no one to share them with."""
        return connection.execute(
            f"SELECT {CHUNK_COLUMNS}, kv_stale FROM chunks WHERE ({condition}) {CLAIM_ORDER}",
            (limit,),
        ).fetchall()


class PostgresDialect(StoreDialect):
    """The shared library: every replica's store, embeddings and change log in one database."""

    keeps_vectors = True
    insertion_order = "position"
    release_claim = ", claimed_by = NULL, claimed_until = NULL"

    def any_of(self, column: str, values: Sequence[Any]) -> tuple[str, Any]:
        return f"{column} = ANY(?)", list(values)

    def lock_writes(self, connection: Executor) -> None:
        """Serialize with every other library write, on every replica (`changelog.lock_writes`)."""
        changelog.lock_writes(_raw(connection))

    def log_change(
        self, connection: Executor, kind: ChangeKind, documents: list[str], chunks: list[int]
    ) -> None:
        changelog.record(_raw(connection), kind, documents, chunks)

    def keyword_search(
        self,
        connection: Executor,
        terms: list[str],
        limit: int,
        document_ids: Sequence[str] | None,
        project: str | None,
    ) -> list[tuple[int, float]]:
        """The same from the chunks' `search_words` (English stemming and stop words), ranked
        by `ts_rank` normalized by length: term frequency, without BM25's rarity weighting."""
        conditions, parameters = self._chunk_conditions(document_ids, project)
        rows = connection.execute(
            "SELECT id, ts_rank(search_words, query, 1) AS score "
            "FROM chunks, to_tsquery('english', ?) AS query "
            f"WHERE search_words @@ query{conditions} ORDER BY score DESC, id LIMIT ?",
            (tsquery_text(terms), *parameters, limit),
        ).fetchall()
        return [(int(row[0]), float(row[1])) for row in rows]

    def claim(self, connection: Executor, condition: str, limit: int, claimant: str) -> list[Any]:
        """Chunks matching `condition` that no replica holds a live claim on, now claimed by
        `claimant` for `CLAIM_LEASE_S`; rows locked by another transaction are skipped."""
        return connection.execute(
            "UPDATE chunks SET claimed_by = ?, "
            "claimed_until = now() + make_interval(secs => ?) WHERE id IN ("
            f"SELECT id FROM chunks WHERE ({condition}) "
            "AND (claimed_until IS NULL OR claimed_until < now()) "
            f"{CLAIM_ORDER} FOR UPDATE SKIP LOCKED) "
            f"RETURNING {CHUNK_COLUMNS}, kv_stale",
            (claimant, CLAIM_LEASE_S, limit),
        ).fetchall()


def _raw(connection: Executor) -> Any:
    assert isinstance(connection, QmarkConnection), connection
    return connection.raw


def open_dialect(where: str | Path | PgDatabase) -> StoreDialect:
    """The dialect of a SQLite file at `where`, or of the PostgreSQL database `where`."""
    if isinstance(where, PgDatabase):
        return PostgresDialect(QmarkDatabase(where))
    return StoreDialect(ObjectDatabase(Path(where)))
