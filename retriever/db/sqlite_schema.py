"""Opening the document database: connection settings and the versioned schema."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from retriever.objects.schema import PROJECTS_SCHEMA, VECTOR_STORE_SCHEMA

SCHEMA_VERSION = 8
_SCHEMA = (
    """
    CREATE TABLE documents (
        id TEXT PRIMARY KEY,
        content_hash TEXT NOT NULL UNIQUE,
        metadata TEXT NOT NULL CHECK (json_valid(metadata)),
        status TEXT NOT NULL CHECK (status IN ('pending', 'indexed', 'cached', 'failed')),
        created_at REAL NOT NULL,
        num_chunks INTEGER NOT NULL,
        num_chars INTEGER NOT NULL
    )
    """,
    "CREATE INDEX documents_by_status ON documents (status)",
    """
    CREATE TABLE chunks (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        document_id TEXT NOT NULL REFERENCES documents (id) ON DELETE CASCADE,
        chunk_index INTEGER NOT NULL,
        text TEXT NOT NULL,
        token_ids BLOB NOT NULL,
        kv_cached INTEGER NOT NULL DEFAULT 0 CHECK (kv_cached IN (0, 1)),
        UNIQUE (document_id, chunk_index)
    )
    """,
    "CREATE INDEX chunks_awaiting_kv ON chunks (id) WHERE kv_cached = 0",
)
CHUNK_SPANS = tuple(
    f"ALTER TABLE chunks ADD COLUMN {column} INTEGER" for column in ("start_char", "end_char")
)
"""Each chunk's span `[start_char, end_char)` in its document's extracted text (citations); the
same statements on PostgreSQL (`retriever.db.pg_schema`). NULL for chunks stored before."""
_MIGRATIONS: dict[int, tuple[str, ...]] = {
    # Version 2: each chunk's chunk-store key and whether its KV is still in the store. Chunks
    # precomputed before are precomputed again (a store hit) to learn their keys.
    2: (
        "ALTER TABLE chunks ADD COLUMN kv_key TEXT",
        "ALTER TABLE chunks ADD COLUMN kv_present INTEGER NOT NULL DEFAULT 0",
        "CREATE INDEX chunks_by_kv_key ON chunks (kv_key) WHERE kv_key IS NOT NULL",
        "UPDATE chunks SET kv_cached = 0",
        "UPDATE documents SET status = 'indexed' WHERE status = 'cached'",
    ),
    # Version 3: OpenAI's files, vector stores and stored responses, beside the documents.
    3: VECTOR_STORE_SCHEMA,
    # Version 4: chunks whose KV is to be precomputed again, behind neighbours that changed.
    4: (
        "ALTER TABLE chunks ADD COLUMN kv_stale INTEGER NOT NULL DEFAULT 0",
        "CREATE INDEX chunks_stale ON chunks (id) WHERE kv_stale = 1",
    ),
    # Version 5: keyword search. An FTS5 index over the chunks' text, kept by triggers in the
    # transaction that adds or deletes the chunks, and filled from the chunks already stored.
    5: (
        "CREATE VIRTUAL TABLE chunks_fts USING fts5(text, content='chunks', content_rowid='id', "
        "tokenize='porter unicode61 remove_diacritics 2')",
        "CREATE TRIGGER chunks_fts_added AFTER INSERT ON chunks BEGIN "
        "INSERT INTO chunks_fts (rowid, text) VALUES (new.id, new.text); END",
        "CREATE TRIGGER chunks_fts_removed AFTER DELETE ON chunks BEGIN "
        "INSERT INTO chunks_fts (chunks_fts, rowid, text) VALUES ('delete', old.id, old.text); END",
        "CREATE TRIGGER chunks_fts_changed AFTER UPDATE OF text ON chunks BEGIN "
        "INSERT INTO chunks_fts (chunks_fts, rowid, text) VALUES ('delete', old.id, old.text); "
        "INSERT INTO chunks_fts (rowid, text) VALUES (new.id, new.text); END",
        "INSERT INTO chunks_fts (chunks_fts) VALUES ('rebuild')",
    ),
    # Version 6: projects; everything stored before belongs to `default`.
    6: PROJECTS_SCHEMA,
    # Version 7: document ids per project (`retriever.library.document_ids`): the documents of
    # projects other than `default` are stored as `project/id`, and their chunks and files follow.
    # The foreign keys are checked at commit, once every reference has moved.
    7: (
        "PRAGMA defer_foreign_keys = ON",
        *(
            f"UPDATE {table} SET document_id = (SELECT project || '/' || id FROM documents "
            f"WHERE documents.id = {table}.document_id) "
            "WHERE document_id IN (SELECT id FROM documents WHERE project <> 'default')"
            for table in ("chunks", "files")
        ),
        "UPDATE documents SET id = project || '/' || id WHERE project <> 'default'",
    ),
    # Version 8: each chunk's character span in its document's extracted text, for citations;
    # chunks stored before have none (NULL), as the text they were cut from is not kept.
    8: CHUNK_SPANS,
}


def open_database(path: Path) -> sqlite3.Connection:
    """Connect (autocommit; callers run explicit transactions), in WAL mode, schema ensured."""
    path.parent.mkdir(parents=True, exist_ok=True)
    connection = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
    try:
        connection.execute("PRAGMA journal_mode = WAL")
        connection.execute("PRAGMA synchronous = FULL")
        connection.execute("PRAGMA foreign_keys = ON")
        connection.execute("PRAGMA busy_timeout = 5000")
        _ensure_schema(connection, path)
    except BaseException:
        connection.close()
        raise
    return connection


def _ensure_schema(connection: sqlite3.Connection, path: Path) -> None:
    connection.execute("BEGIN IMMEDIATE")
    try:
        version = connection.execute("PRAGMA user_version").fetchone()[0]
        if version > SCHEMA_VERSION:
            raise RuntimeError(
                f"{path} has schema version {version}; this build understands up to "
                f"{SCHEMA_VERSION}"
            )
        if version == 0:
            for statement in _SCHEMA:
                connection.execute(statement)
            version = 1
        for upgrade in range(version + 1, SCHEMA_VERSION + 1):
            for statement in _MIGRATIONS[upgrade]:
                connection.execute(statement)
        connection.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
    except BaseException:
        connection.execute("ROLLBACK")
        raise
    connection.execute("COMMIT")
