"""Which chunks' KV is in the chunk store, and the document status that follows from it.

A chunk's KV is precomputed once (``kv_cached``), remembered under its chunk-store key
(``kv_key``) and then tracked as present or evicted (``kv_present``) from what the engine reports.
A document is ``cached`` exactly while every one of its chunks is precomputed and present; an
eviction turns it back to ``indexed`` (searchable, answered with those chunks computed), and a
request that stores the chunk again turns it ``cached`` again. Precompute is not redone for an
evicted chunk: the store's capacity decided against it, and the next request that needs it
stores it anyway.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, Protocol


class Executor(Protocol):
    """A connection taking `?` placeholders: SQLite's, or `pg_database.QmarkConnection`."""

    def execute(self, sql: str, parameters: Sequence[Any] = ...) -> Any: ...


BATCH = 500
"""Keys or ids per statement, well under SQLite's limit on bound parameters."""

_NOT_ALL_PRESENT = (
    "EXISTS (SELECT 1 FROM chunks WHERE chunks.document_id = documents.id "
    "AND (kv_cached = 0 OR kv_present = 0))"
)


def _batches(values: Iterable[str]) -> Iterable[list[str]]:
    ordered = sorted(set(values))
    for start in range(0, len(ordered), BATCH):
        yield ordered[start : start + BATCH]


def set_presence(connection: Executor, keys: Iterable[str], present: bool) -> set[str]:
    """Mark the chunks stored under ``keys`` present or not; returns their documents' ids."""
    documents: set[str] = set()
    for batch in _batches(keys):
        marks = ",".join("?" * len(batch))
        rows = connection.execute(
            f"UPDATE chunks SET kv_present = ? WHERE kv_key IN ({marks}) RETURNING document_id",
            (int(present), *batch),
        ).fetchall()
        documents.update(row[0] for row in rows)
    return documents


def refresh_status(connection: Executor, document_ids: Sequence[str]) -> list[str]:
    """Set ``cached``/``indexed`` of these documents from their chunks; returns those that
    turned ``cached``."""
    promoted: list[str] = []
    for batch in _batches(document_ids):
        marks = ",".join("?" * len(batch))
        connection.execute(
            f"UPDATE documents SET status = 'indexed' "
            f"WHERE status = 'cached' AND id IN ({marks}) AND {_NOT_ALL_PRESENT}",
            batch,
        )
        rows = connection.execute(
            f"UPDATE documents SET status = 'cached' "
            f"WHERE status = 'indexed' AND id IN ({marks}) AND NOT {_NOT_ALL_PRESENT} "
            "RETURNING id",
            batch,
        ).fetchall()
        promoted += [row[0] for row in rows]
    return promoted


def progress(connection: Executor) -> tuple[dict[str, int], int]:
    """Documents per status, and chunks of indexed documents still waiting for precompute."""
    by_status = dict(
        connection.execute("SELECT status, count(*) FROM documents GROUP BY status").fetchall()
    )
    waiting = connection.execute(
        "SELECT count(*) FROM chunks WHERE kv_cached = 0 "
        "AND document_id IN (SELECT id FROM documents WHERE status = 'indexed')"
    ).fetchone()[0]
    return by_status, waiting
