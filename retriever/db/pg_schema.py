"""The shared library's tables on PostgreSQL, created or upgraded by whichever replica starts first.

Beside what the SQLite store keeps, chunks hold their embedding (so replicas never embed again
what another one ingested), a precompute claim (`claimed_by` until `claimed_until`) and whether
their KV is to be precomputed again (`kv_stale`, version 2), their words for keyword search
(`search_words`, version 3), the project owning each document and object (version 4), document
ids per project (version 5: `retriever.library.document_ids`), each chunk's character span in
its document (version 6), and `library_changes` logs every add and delete, in commit order, for
the replicas to follow. `library_log_floor` remembers up to which change the log was trimmed.
OpenAI's files, vector stores and stored responses are shared too.
"""

from __future__ import annotations

import re

import psycopg

from retriever.db.sqlite_schema import CHUNK_SPANS
from retriever.objects.schema import PROJECTS_SCHEMA, VECTOR_STORE_SCHEMA

SCHEMA_VERSION = 6
SCHEMA_LOCK = 0x72616762_6C656E64 >> 1
"""Advisory lock key that serializes schema creation between replicas starting together."""

_SQLITE_TO_POSTGRES = (
    (r"INTEGER PRIMARY KEY AUTOINCREMENT", "BIGSERIAL PRIMARY KEY"),
    (r"\bBLOB\b", "BYTEA"),
    (r"\b(\w+_at) INTEGER\b", r"\1 BIGINT"),
    (r" CHECK \(json_valid\(\w+\)\)", ""),
)
"""SQLite's types as PostgreSQL spells them (times in BIGINT); JSON is not checked here."""


def postgres_ddl(statement: str) -> str:
    """A table written for SQLite, in PostgreSQL's types."""
    for pattern, replacement in _SQLITE_TO_POSTGRES:
        statement = re.sub(pattern, replacement, statement)
    return statement


OPENAI_OBJECTS_SCHEMA = tuple(postgres_ddl(statement) for statement in VECTOR_STORE_SCHEMA)
"""OpenAI's files, vector stores and stored responses: `retriever.objects.schema`'s tables."""
_STALE_CHUNKS = (
    # Version 2: chunks whose KV is to be precomputed again, behind neighbours that changed.
    "ALTER TABLE chunks ADD COLUMN kv_stale INTEGER NOT NULL DEFAULT 0",
    "CREATE INDEX chunks_stale ON chunks (id) WHERE kv_stale = 1",
)
_KEYWORD_SEARCH = (
    # Version 3: keyword search. Each chunk's text as a tsvector, computed by the database with
    # the row (so every replica searches the same words), and the GIN index that finds them.
    "ALTER TABLE chunks ADD COLUMN search_words tsvector "
    "GENERATED ALWAYS AS (to_tsvector('english', text)) STORED",
    "CREATE INDEX chunks_by_word ON chunks USING GIN (search_words)",
)
_IDS_PER_PROJECT = (
    # Version 5: document ids per project (`retriever.library.document_ids`): the documents of
    # projects other than `default` are stored as `project/id`. The references to a document
    # follow its id (ON UPDATE CASCADE; nothing renames a document after this). Chunk ids, all
    # the replicas' indexes and the change log go by, do not change, so no replica rebuilds; the
    # document ids of changes logged before keep the old names (followers never read them).
    *(
        f"ALTER TABLE {table} DROP CONSTRAINT {table}_document_id_fkey, "
        f"ADD CONSTRAINT {table}_document_id_fkey FOREIGN KEY (document_id) "
        "REFERENCES documents (id) ON DELETE CASCADE ON UPDATE CASCADE"
        for table in ("chunks", "files")
    ),
    "UPDATE documents SET id = project || '/' || id WHERE project <> 'default'",
)
_UPGRADES: dict[int, tuple[str, ...]] = {
    2: _STALE_CHUNKS,
    3: _KEYWORD_SEARCH,
    4: PROJECTS_SCHEMA,  # version 4: projects; everything stored before belongs to `default`
    5: _IDS_PER_PROJECT,
    6: CHUNK_SPANS,  # version 6: chunks' character spans; NULL for the chunks stored before
}
"""Statements that bring a database of the version before each key up to it."""
_SCHEMA = (
    """
    CREATE TABLE documents (
        id TEXT PRIMARY KEY,
        content_hash TEXT NOT NULL UNIQUE,
        metadata TEXT NOT NULL,
        status TEXT NOT NULL CHECK (status IN ('pending', 'indexed', 'cached', 'failed')),
        created_at DOUBLE PRECISION NOT NULL,
        num_chunks INTEGER NOT NULL,
        num_chars INTEGER NOT NULL,
        position BIGSERIAL NOT NULL UNIQUE
    )
    """,
    "CREATE INDEX documents_by_status ON documents (status)",
    """
    CREATE TABLE chunks (
        id BIGSERIAL PRIMARY KEY,
        document_id TEXT NOT NULL REFERENCES documents (id) ON DELETE CASCADE,
        chunk_index INTEGER NOT NULL,
        text TEXT NOT NULL,
        token_ids BYTEA NOT NULL,
        embedding BYTEA NOT NULL,
        kv_cached INTEGER NOT NULL DEFAULT 0 CHECK (kv_cached IN (0, 1)),
        kv_key TEXT,
        kv_present INTEGER NOT NULL DEFAULT 0 CHECK (kv_present IN (0, 1)),
        claimed_by TEXT,
        claimed_until TIMESTAMPTZ,
        UNIQUE (document_id, chunk_index)
    )
    """,
    "CREATE INDEX chunks_awaiting_kv ON chunks (id) WHERE kv_cached = 0",
    "CREATE INDEX chunks_by_kv_key ON chunks (kv_key) WHERE kv_key IS NOT NULL",
    *_STALE_CHUNKS,
    *_KEYWORD_SEARCH,
    *CHUNK_SPANS,
    """
    CREATE TABLE library_changes (
        seq BIGSERIAL PRIMARY KEY,
        kind TEXT NOT NULL CHECK (kind IN ('add', 'delete')),
        document_ids TEXT[] NOT NULL,
        chunk_ids BIGINT[] NOT NULL,
        recorded_at TIMESTAMPTZ NOT NULL DEFAULT now()
    )
    """,
    "CREATE TABLE library_log_floor (seq BIGINT NOT NULL)",
    "INSERT INTO library_log_floor VALUES (0)",
    "CREATE TABLE library_schema (version INTEGER NOT NULL)",
    *OPENAI_OBJECTS_SCHEMA,
    *PROJECTS_SCHEMA,
)


def ensure_schema(connection: psycopg.Connection) -> None:
    """Create the tables if the database has none; refuse a schema newer than this build's.

    Runs inside the caller's transaction."""
    connection.execute("SELECT pg_advisory_xact_lock(%s)", (SCHEMA_LOCK,))
    exists = connection.execute("SELECT to_regclass('library_schema') IS NOT NULL").fetchone()
    if exists is not None and exists[0]:
        row = connection.execute("SELECT max(version) FROM library_schema").fetchone()
        version = row[0] if row is not None and row[0] is not None else 0
        if version > SCHEMA_VERSION:
            raise RuntimeError(
                f"the library database has schema version {version}; this build understands "
                f"up to {SCHEMA_VERSION}"
            )
        for upgrade in range(version + 1, SCHEMA_VERSION + 1):
            for statement in _UPGRADES[upgrade]:
                connection.execute(statement)
            connection.execute("INSERT INTO library_schema VALUES (%s)", (upgrade,))
        return
    for statement in _SCHEMA:
        connection.execute(statement)
    connection.execute("INSERT INTO library_schema VALUES (%s)", (SCHEMA_VERSION,))
