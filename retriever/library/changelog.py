"""The library's change log on PostgreSQL: what each replica replays to keep its vector index in
step with the shared store.

Every transaction that adds or deletes documents first takes one advisory lock (`lock_writes`)
and, as its last statement, logs one change row (`record`). The lock is held until commit, so
writes commit one at a time and in the order of their `seq`: a follower that has applied
everything up to `seq = n` can never see a change `<= n` commit later. The log is trimmed of old
changes (`trim`); a follower left behind the trimmed part rebuilds from a snapshot instead.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Literal

import numpy as np
import psycopg

WRITE_LOCK = 0x6C6962_72617279
"""Advisory lock key every library write takes first (`lock_writes`)."""
EMBEDDING_DTYPE = np.dtype("<f4")
SNAPSHOT_BATCH = 1024

ChangeKind = Literal["add", "delete"]


@dataclass(frozen=True)
class Change:
    """One committed write: the documents it added or deleted and their chunks."""

    seq: int
    kind: ChangeKind
    document_ids: list[str]
    chunk_ids: list[int]


def lock_writes(connection: psycopg.Connection) -> None:
    """Serialize this transaction with every other library write, on every replica."""
    connection.execute("SELECT pg_advisory_xact_lock(%s)", (WRITE_LOCK,))


def record(
    connection: psycopg.Connection,
    kind: ChangeKind,
    document_ids: Sequence[str],
    chunk_ids: Sequence[int],
) -> int:
    """Log a change in the caller's transaction (after `lock_writes`); returns its seq."""
    row = connection.execute(
        "INSERT INTO library_changes (kind, document_ids, chunk_ids) VALUES (%s, %s, %s) "
        "RETURNING seq",
        (kind, list(document_ids), list(chunk_ids)),
    ).fetchone()
    assert row is not None
    return int(row[0])


def changes_after(connection: psycopg.Connection, seq: int, limit: int) -> list[Change]:
    rows = connection.execute(
        "SELECT seq, kind, document_ids, chunk_ids FROM library_changes "
        "WHERE seq > %s ORDER BY seq LIMIT %s",
        (seq, limit),
    ).fetchall()
    return [
        Change(int(seq), kind, list(documents), [int(chunk) for chunk in chunks])
        for seq, kind, documents, chunks in rows
    ]


def floor(connection: psycopg.Connection) -> int:
    """The highest seq trimmed from the log (0: nothing was)."""
    row = connection.execute("SELECT seq FROM library_log_floor").fetchone()
    return int(row[0]) if row is not None else 0


def latest(connection: psycopg.Connection) -> int:
    """The seq of the last change visible to this transaction."""
    row = connection.execute("SELECT max(seq) FROM library_changes").fetchone()
    last = row[0] if row is not None else None
    return int(last) if last is not None else floor(connection)


def trim(connection: psycopg.Connection, older_than: timedelta) -> int:
    """Delete changes logged more than `older_than` ago, keeping the newest; returns how many."""
    lock_writes(connection)
    rows = connection.execute(
        "DELETE FROM library_changes WHERE recorded_at < now() - %s "
        "AND seq < (SELECT max(seq) FROM library_changes) RETURNING seq",
        (older_than,),
    ).fetchall()
    if rows:
        connection.execute(
            "UPDATE library_log_floor SET seq = greatest(seq, %s)", (max(r[0] for r in rows),)
        )
    return len(rows)


def vectors_of(connection: psycopg.Connection, chunk_ids: Sequence[int]) -> dict[int, np.ndarray]:
    """The stored embeddings of those chunks that still exist."""
    rows = connection.execute(
        "SELECT id, embedding FROM chunks WHERE id = ANY(%s)", (list(chunk_ids),)
    ).fetchall()
    return {int(chunk_id): decode_vector(blob) for chunk_id, blob in rows}


def all_vectors(connection: psycopg.Connection) -> Iterator[tuple[list[int], np.ndarray]]:
    """Every chunk's id and embedding, in batches, as this transaction sees them."""
    with connection.cursor(name="library_snapshot") as cursor:
        cursor.execute("SELECT id, embedding FROM chunks ORDER BY id")
        while rows := cursor.fetchmany(SNAPSHOT_BATCH):
            yield [int(r[0]) for r in rows], np.stack([decode_vector(r[1]) for r in rows])


def encode_vector(vector: np.ndarray) -> bytes:
    return np.asarray(vector, dtype=EMBEDDING_DTYPE).tobytes()


def decode_vector(blob: bytes) -> np.ndarray:
    return np.frombuffer(blob, dtype=EMBEDDING_DTYPE)
