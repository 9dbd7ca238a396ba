"""What an ingest batch becomes before the library's write lock is taken: drafts of its
documents, chunked by the served model's tokenizer, and the embeddings of their chunks.

Only content the project has not stored yet is chunked and embedded; an id the project already
gave other content is refused before any embedding work. Both steps run without the lock, so a
large document does not hold up a small one or a delete (`retriever.library.facade`).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from retriever.ingest.chunking import Chunking, TextTokenizer, content_hash
from retriever.library.document_ids import stored_id
from retriever.library.documents import NewDocument, document_key
from retriever.library.drafts import DocumentConflict
from retriever.library.interfaces import LibraryStore
from retriever.library.reconcile import TextEmbedder
from retriever.library.records import DocumentDraft

EMBED_BATCH = 32


def prepared_batch(
    documents: Sequence[NewDocument],
    texts: list[str],
    project: str,
    store: LibraryStore,
    tokenizer: TextTokenizer,
    embedder: TextEmbedder,
    default_chunking: Chunking,
) -> tuple[list[DocumentDraft], np.ndarray]:
    """Drafts and the embeddings of their chunks, in chunk order (no lock needed)."""
    drafts = _drafts(documents, texts, project, store, tokenizer, default_chunking)
    chunk_texts = [chunk.text for draft in drafts for chunk in draft.chunks]
    return drafts, _embed(chunk_texts, embedder)


def _embed(texts: list[str], embedder: TextEmbedder) -> np.ndarray:
    """One embedder call per batch, so other callers (a query, a small ingest) get a turn.
    The batches hold texts of similar length (longest first), so little of a batch is padding:
    chunks of one document differ (a short last one), and the model pads each batch to its
    longest text."""
    order = sorted(range(len(texts)), key=lambda position: -len(texts[position]))
    vectors = np.empty((len(texts), embedder.dim), dtype=np.float32)
    for start in range(0, len(order), EMBED_BATCH):
        positions = order[start : start + EMBED_BATCH]
        batch = [texts[position] for position in positions]
        vectors[positions] = embedder.embed(batch, batch_size=EMBED_BATCH)
    return vectors


def _drafts(
    documents: Sequence[NewDocument],
    texts: list[str],
    project: str,
    store: LibraryStore,
    tokenizer: TextTokenizer,
    default_chunking: Chunking,
) -> list[DocumentDraft]:
    """Drafts with chunks only for content `project` has not stored yet; an id `project` gave
    other content raises `DocumentConflict` before any embedding work."""
    drafts: list[DocumentDraft] = []
    new_hashes: set[str] = set()
    for document, text in zip(documents, texts, strict=True):
        chunking = document.chunking or default_chunking
        text_hash = document_key(content_hash(text), chunking, default_chunking, project)
        is_new = text_hash not in new_hashes and store.find_by_hash(text_hash) is None
        if (
            is_new
            and document.id is not None
            and store.get_document(stored_id(document.id, project), project=project)
        ):
            raise DocumentConflict(
                f"document {document.id!r} already exists with different content"
            )
        chunks = chunking.chunk(text, tokenizer) if is_new else []
        new_hashes.add(text_hash)
        drafts.append(
            DocumentDraft(
                document.id, text_hash, document.metadata or {}, len(text), chunks, project
            )
        )
    return drafts
