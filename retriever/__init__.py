"""The retriever's front door: everything the gateway uses of chunking, extraction, embeddings,
the vector index, the document library and OpenAI's retrieval objects, importable from here.

Inside, the work is split by job: `retriever.ingest` turns uploads into text and chunks,
`retriever.search` embeds, finds and ranks them, `retriever.library` stores documents and keeps
the indexes in step, `retriever.objects` holds OpenAI's files, vector stores and stored
responses, and `retriever.db` opens the SQLite or PostgreSQL database they share.

Each name is imported on first use, from the module that defines it: `import retriever` stays
light, and FAISS, sentence-transformers or pypdf load only with the names that need them, when
the gateway imports those (as before the front door, so the CLI and start-up keep their pace).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from retriever.ingest.chunking import Chunking
    from retriever.ingest.extract import InvalidDocument, TextTooLarge, UnsupportedMediaType
    from retriever.ingest.extract_runner import ExtractBudget, ExtractionTimeout, extract_upload
    from retriever.library.documents import Hit, InvalidIngest, NewDocument
    from retriever.library.drafts import DocumentConflict
    from retriever.library.facade import STORE_FILE, Library
    from retriever.library.interfaces import (
        EVERY_PROJECT,
        LibraryStore,
        LibraryUnavailable,
        OutageLog,
    )
    from retriever.library.records import DEFAULT_PROJECT, DOCUMENT_STATUSES, ChunkRow
    from retriever.objects.cursor_pages import PageRequest, UnknownCursor
    from retriever.objects.file_store import FileRecord, new_file_id
    from retriever.objects.rag_objects import RagObjects
    from retriever.objects.response_store import StoredResponse
    from retriever.objects.vector_store_queries import Attachment, UnknownFiles, UnknownVectorStore
    from retriever.objects.vector_store_records import (
        BatchRecord,
        FileCounts,
        StoreFileRecord,
        VectorStoreRecord,
    )
    from retriever.search.embed import Embedder
    from retriever.search.index import VectorIndex
    from retriever.search.neighbours import NeighbourPolicy, context_order, nearest_chunks
    from retriever.search.query_likelihood import QueryLikelihoodReranker
    from retriever.search.ranking import Ranking, Reranker
    from retriever.tenant import Tenant

_HOMES: dict[str, tuple[str, ...]] = {
    "retriever.ingest.chunking": ("Chunking",),
    "retriever.ingest.extract": ("InvalidDocument", "TextTooLarge", "UnsupportedMediaType"),
    "retriever.ingest.extract_runner": ("ExtractBudget", "ExtractionTimeout", "extract_upload"),
    "retriever.library.documents": ("Hit", "InvalidIngest", "NewDocument"),
    "retriever.library.drafts": ("DocumentConflict",),
    "retriever.library.facade": ("STORE_FILE", "Library"),
    "retriever.library.interfaces": (
        "EVERY_PROJECT",
        "LibraryStore",
        "LibraryUnavailable",
        "OutageLog",
    ),
    "retriever.library.records": ("DEFAULT_PROJECT", "DOCUMENT_STATUSES", "ChunkRow"),
    "retriever.objects.cursor_pages": ("PageRequest", "UnknownCursor"),
    "retriever.objects.file_store": ("FileRecord", "new_file_id"),
    "retriever.objects.rag_objects": ("RagObjects",),
    "retriever.objects.response_store": ("StoredResponse",),
    "retriever.objects.vector_store_queries": ("Attachment", "UnknownFiles", "UnknownVectorStore"),
    "retriever.objects.vector_store_records": (
        "BatchRecord",
        "FileCounts",
        "StoreFileRecord",
        "VectorStoreRecord",
    ),
    "retriever.search.embed": ("Embedder",),
    "retriever.search.index": ("VectorIndex",),
    "retriever.search.neighbours": ("NeighbourPolicy", "context_order", "nearest_chunks"),
    "retriever.search.query_likelihood": ("QueryLikelihoodReranker",),
    "retriever.search.ranking": ("Ranking", "Reranker"),
    "retriever.tenant": ("Tenant",),
}
"""Where each exported name is defined."""
_HOME_OF = {name: module for module, names in _HOMES.items() for name in names}

__all__ = [
    "DEFAULT_PROJECT",
    "DOCUMENT_STATUSES",
    "EVERY_PROJECT",
    "STORE_FILE",
    "Attachment",
    "BatchRecord",
    "ChunkRow",
    "Chunking",
    "DocumentConflict",
    "Embedder",
    "ExtractBudget",
    "ExtractionTimeout",
    "FileCounts",
    "FileRecord",
    "Hit",
    "InvalidDocument",
    "InvalidIngest",
    "Library",
    "LibraryStore",
    "LibraryUnavailable",
    "NeighbourPolicy",
    "NewDocument",
    "OutageLog",
    "PageRequest",
    "QueryLikelihoodReranker",
    "RagObjects",
    "Ranking",
    "Reranker",
    "StoreFileRecord",
    "StoredResponse",
    "Tenant",
    "TextTooLarge",
    "UnknownCursor",
    "UnknownFiles",
    "UnknownVectorStore",
    "UnsupportedMediaType",
    "VectorIndex",
    "VectorStoreRecord",
    "context_order",
    "extract_upload",
    "nearest_chunks",
    "new_file_id",
]


def __getattr__(name: str) -> object:
    """Import an exported name from its module on first use (PEP 562)."""
    module = _HOME_OF.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
