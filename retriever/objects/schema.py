"""Tables of OpenAI's retrieval objects (schema version 3), stored beside the documents they use.

A file is one uploaded file and the library document its text became (several files with the same
text share one document; ``owns_document`` marks the file whose upload created it). A vector store
is a named set of files; its files carry the attributes that search filters read. Rows are paged
by ``seq``, which grows with creation. Deleting a document deletes its files, and deleting a file
or a vector store detaches it everywhere (foreign keys cascade).
"""

from __future__ import annotations

VECTOR_STORE_SCHEMA: tuple[str, ...] = (
    """
    CREATE TABLE files (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        id TEXT NOT NULL UNIQUE,
        document_id TEXT NOT NULL REFERENCES documents (id) ON DELETE CASCADE,
        owns_document INTEGER NOT NULL CHECK (owns_document IN (0, 1)),
        filename TEXT NOT NULL,
        purpose TEXT NOT NULL,
        bytes INTEGER NOT NULL,
        content BLOB NOT NULL,
        created_at INTEGER NOT NULL
    )
    """,
    "CREATE INDEX files_by_document ON files (document_id)",
    """
    CREATE TABLE vector_stores (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        id TEXT NOT NULL UNIQUE,
        name TEXT NOT NULL,
        description TEXT,
        metadata TEXT NOT NULL CHECK (json_valid(metadata)),
        expires_after_days INTEGER,
        created_at INTEGER NOT NULL,
        last_active_at INTEGER NOT NULL
    )
    """,
    """
    CREATE TABLE vector_store_file_batches (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        id TEXT NOT NULL UNIQUE,
        vector_store_id TEXT NOT NULL REFERENCES vector_stores (id) ON DELETE CASCADE,
        created_at INTEGER NOT NULL
    )
    """,
    """
    CREATE TABLE vector_store_files (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        vector_store_id TEXT NOT NULL REFERENCES vector_stores (id) ON DELETE CASCADE,
        file_id TEXT NOT NULL REFERENCES files (id) ON DELETE CASCADE,
        batch_id TEXT REFERENCES vector_store_file_batches (id) ON DELETE SET NULL,
        attributes TEXT NOT NULL CHECK (json_valid(attributes)),
        created_at INTEGER NOT NULL,
        UNIQUE (vector_store_id, file_id)
    )
    """,
    "CREATE INDEX vector_store_files_by_file ON vector_store_files (file_id)",
    "CREATE INDEX vector_store_files_by_batch ON vector_store_files (batch_id)",
    """
    CREATE TABLE responses (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        id TEXT NOT NULL UNIQUE,
        body TEXT NOT NULL CHECK (json_valid(body)),
        conversation TEXT NOT NULL CHECK (json_valid(conversation)),
        created_at INTEGER NOT NULL
    )
    """,
)
PROJECTS_SCHEMA: tuple[str, ...] = (
    *(
        f"ALTER TABLE {table} ADD COLUMN project TEXT NOT NULL DEFAULT 'default'"
        for table in ("documents", "files", "vector_stores", "responses")
    ),
    "CREATE INDEX documents_by_project ON documents (project)",
    "CREATE INDEX files_by_project ON files (project, seq)",
    "CREATE INDEX vector_stores_by_project ON vector_stores (project, seq)",
)
"""Projects: the project owning each document, file, vector store and stored response (what an
API key names, `gateway.http.projects`); rows stored before projects are ``default``'s. A vector
store's files and file batches, and a document's chunks, belong to the project of the object
they hang from, and are only reached through it."""
