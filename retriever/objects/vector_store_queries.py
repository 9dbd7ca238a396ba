"""The statements `VectorStoreDB` builds its transactions from, each on an open connection and
within one project: read a vector store, one of its files or a file batch, and attach files.

Another project's store, file or batch reads as unknown, exactly like a made-up id.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from retriever.library.records import metadata_json
from retriever.objects.vector_store_records import (
    BATCH_COLUMNS,
    STORE_COLUMNS,
    STORE_FILE_COLUMNS,
    STORE_FILES,
    BatchRecord,
    StoreFileRecord,
    VectorStoreRecord,
    batch_from_row,
    in_marks,
    store_file_from_row,
    store_from_row,
)

OWN_STORE = "v.vector_store_id IN (SELECT id FROM vector_stores WHERE project = ?)"
"""Rows of `vector_store_files v` whose store is the project's (one `?`: the project)."""


@dataclass(frozen=True)
class Attachment:
    file_id: str
    attributes: dict[str, Any]


class UnknownFiles(LookupError):
    def __init__(self, file_ids: list[str]) -> None:
        super().__init__(f"No such file: {', '.join(repr(i) for i in file_ids)}.")
        self.file_ids = file_ids


class UnknownVectorStore(LookupError):
    pass


def select_store(
    connection: sqlite3.Connection, store_id: str, project: str, required: bool = True
) -> VectorStoreRecord | None:
    row = connection.execute(
        f"SELECT {STORE_COLUMNS} FROM vector_stores s WHERE s.id = ? AND s.project = ?",
        (store_id, project),
    ).fetchone()
    if row is None and required:
        raise UnknownVectorStore(store_id)
    return None if row is None else store_from_row(row)


def select_store_file(
    connection: sqlite3.Connection, store_id: str, file_id: str, project: str
) -> StoreFileRecord | None:
    row = connection.execute(
        f"SELECT {STORE_FILE_COLUMNS} FROM {STORE_FILES} "
        f"WHERE v.vector_store_id = ? AND v.file_id = ? AND {OWN_STORE}",
        (store_id, file_id, project),
    ).fetchone()
    return None if row is None else store_file_from_row(row)


def select_batch(
    connection: sqlite3.Connection, store_id: str, batch_id: str, project: str
) -> BatchRecord | None:
    row = connection.execute(
        f"SELECT {BATCH_COLUMNS} FROM vector_store_file_batches b "
        "WHERE b.id = ? AND b.vector_store_id = ? "
        "AND b.vector_store_id IN (SELECT id FROM vector_stores WHERE project = ?)",
        (batch_id, store_id, project),
    ).fetchone()
    return None if row is None else batch_from_row(row)


def attach_files(
    connection: sqlite3.Connection,
    store_id: str,
    attachments: Sequence[Attachment],
    batch_id: str | None,
    project: str,
) -> None:
    """Attach the project's files; another project's file id is as unknown as a made-up one."""
    file_ids = [attachment.file_id for attachment in attachments]
    known = {
        row[0]
        for row in connection.execute(
            f"SELECT id FROM files WHERE id IN ({in_marks(file_ids)}) AND project = ?",
            (*file_ids, project),
        )
    }
    unknown = [file_id for file_id in dict.fromkeys(file_ids) if file_id not in known]
    if unknown:
        raise UnknownFiles(unknown)
    now = int(time.time())
    connection.executemany(
        "INSERT INTO vector_store_files (vector_store_id, file_id, batch_id, attributes, "
        "created_at) VALUES (?, ?, ?, ?, ?) ON CONFLICT (vector_store_id, file_id) DO UPDATE "
        "SET attributes = excluded.attributes, "
        "batch_id = COALESCE(excluded.batch_id, vector_store_files.batch_id)",
        [(store_id, a.file_id, batch_id, metadata_json(a.attributes), now) for a in attachments],
    )
