"""The document library the gateway uses: ingest, search, get, list and delete, persisted on disk.

Layout under `data_dir`: `documents.sqlite3` (documents, chunks and their token ids; the source of
truth) and `vectors.faiss` (the vector index, rebuilt from the store whenever it lags behind).
Writes are serialized by one lock, held only for the database transaction and the index update:
chunking and embedding a batch happen before it is taken, so a large document does not hold up a
small one or a delete. Searches run alongside writes. One process per `data_dir`.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from retriever.chunking import TextTokenizer, chunk_text, content_hash
from retriever.documents import Hit, IngestResult, NewDocument, validated_texts
from retriever.index import IndexKind, VectorIndex
from retriever.reconcile import TextEmbedder, reconcile
from retriever.records import ChunkRow, DocumentDraft, DocumentRow, Insertion
from retriever.store import DocumentConflict, DocumentStore

logger = logging.getLogger(__name__)
STORE_FILE = "documents.sqlite3"
INDEX_FILE = "vectors.faiss"
EMBED_BATCH = 32


class Library:
    """Documents chunked by the served model's tokenizer, embedded, indexed and stored."""

    def __init__(
        self,
        data_dir: Path,
        tokenizer: TextTokenizer,
        embedder: TextEmbedder,
        index_kind: IndexKind = "flat",
        chunk_tokens: int = 384,
    ) -> None:
        self.data_dir = Path(data_dir)
        self.tokenizer = tokenizer
        self.embedder = embedder
        self.chunk_tokens = chunk_tokens
        self._write_lock = threading.Lock()
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.store = DocumentStore(self.data_dir / STORE_FILE)
        self.index = self._open_index(index_kind, embedder.dim)
        if reconcile(self.store, self.index, embedder).index_changed:
            self.index.save(self._index_path)

    def close(self) -> None:
        self.store.close()

    def __enter__(self) -> Library:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def ingest(self, documents: Sequence[NewDocument]) -> list[IngestResult]:
        """Store and index a batch; nothing is stored if any document is invalid or conflicts.

        Raises an `InvalidIngest` (a ValueError) for bad input and `DocumentConflict` when an id
        is taken by different content. Content already stored comes back with `created=False`.
        """
        texts = validated_texts(documents)
        drafts, vectors = self._prepare(documents, texts)
        with self._write_lock:
            if not self._duplicates_still_stored(drafts):
                # Content this batch duplicated was deleted meanwhile: it needs chunks after all.
                drafts, vectors = self._prepare(documents, texts)
            insertions = self.store.add_documents(drafts)
            chunk_ids = [chunk_id for insertion in insertions for chunk_id in insertion.chunk_ids]
            if chunk_ids:
                self.index.add(chunk_ids, vectors[_created_mask(drafts, insertions)])
                self.index.save(self._index_path)
            for insertion in insertions:
                if insertion.created:
                    self.store.set_status(insertion.document.id, "indexed")
        return [
            IngestResult(
                id=insertion.document.id,
                created=insertion.created,
                num_chunks=insertion.document.num_chunks,
                status="indexed" if insertion.created else insertion.document.status,
            )
            for insertion in insertions
        ]

    def search(
        self,
        query: str,
        top_k: int = 5,
        min_score: float | None = None,
        document_ids: Sequence[str] | None = None,
    ) -> list[Hit]:
        """The `top_k` chunks most similar to `query`, best first, optionally within documents."""
        if not query.strip():
            raise ValueError("query is empty")
        if top_k < 1:
            raise ValueError(f"top_k must be at least 1, got {top_k}")
        allowed = None if document_ids is None else self.store.chunk_ids(document_ids)
        if allowed is not None and not allowed:
            return []
        vector = self.embedder.embed([query])[0]
        scored = self.index.search(vector, top_k, allowed)
        if min_score is not None:
            scored = [(chunk_id, score) for chunk_id, score in scored if score >= min_score]
        rows = {row.id: row for row in self.store.chunks_for([chunk_id for chunk_id, _ in scored])}
        return [
            Hit(row.document_id, row.chunk_index, row.id, score, row.text, row.token_ids)
            for chunk_id, score in scored
            if (row := rows.get(chunk_id)) is not None
        ]

    def get(self, doc_id: str) -> DocumentRow | None:
        return self.store.get_document(doc_id)

    def list(self, offset: int = 0, limit: int = 100) -> tuple[list[DocumentRow], int]:
        """A page of documents, oldest first, and the total count."""
        return self.store.list_documents(offset, limit)

    def delete(self, doc_id: str) -> list[ChunkRow] | None:
        """Delete a document; returns its chunks (to drop their KV caches) or None if unknown."""
        with self._write_lock:
            removed = self.store.delete_document(doc_id)
            if removed:
                self.index.remove(row.id for row in removed)
                self.index.save(self._index_path)
        return removed

    @property
    def _index_path(self) -> Path:
        return self.data_dir / INDEX_FILE

    def _open_index(self, kind: IndexKind, dim: int) -> VectorIndex:
        """The saved index if it matches `kind` and `dim`, else an empty one to rebuild."""
        if self._index_path.exists():
            try:
                saved = VectorIndex.load(self._index_path)
            except Exception:
                logger.exception("cannot read %s; rebuilding it from the store", self._index_path)
            else:
                if saved.kind == kind and saved.dim == dim:
                    return saved
                logger.warning(
                    "%s holds a %s index of dim %d, want %s of dim %d; rebuilding it",
                    self._index_path,
                    saved.kind,
                    saved.dim,
                    kind,
                    dim,
                )
        return VectorIndex(dim, kind)

    def _prepare(
        self, documents: Sequence[NewDocument], texts: list[str]
    ) -> tuple[list[DocumentDraft], np.ndarray]:
        """Drafts and the embeddings of their chunks, in chunk order (no lock needed)."""
        drafts = self._drafts(documents, texts)
        chunk_texts = [chunk.text for draft in drafts for chunk in draft.chunks]
        return drafts, self._embed(chunk_texts)

    def _embed(self, texts: list[str]) -> np.ndarray:
        """One embedder call per batch, so other callers (a query, a small ingest) get a turn."""
        batches = [
            self.embedder.embed(texts[start : start + EMBED_BATCH], batch_size=EMBED_BATCH)
            for start in range(0, len(texts), EMBED_BATCH)
        ]
        if not batches:
            return np.empty((0, self.embedder.dim), dtype=np.float32)
        return np.concatenate(batches)

    def _duplicates_still_stored(self, drafts: Sequence[DocumentDraft]) -> bool:
        """Whether every draft prepared without chunks (a duplicate) still has its content stored
        or earlier in the batch; checked under the write lock, so no delete can intervene."""
        earlier: set[str] = set()
        for draft in drafts:
            is_duplicate = not draft.chunks and draft.content_hash not in earlier
            if is_duplicate and self.store.find_by_hash(draft.content_hash) is None:
                return False
            earlier.add(draft.content_hash)
        return True

    def _drafts(self, documents: Sequence[NewDocument], texts: list[str]) -> list[DocumentDraft]:
        """Drafts with chunks only for content not stored yet; an id taken by other content
        raises `DocumentConflict` before any embedding work."""
        drafts: list[DocumentDraft] = []
        new_hashes: set[str] = set()
        for document, text in zip(documents, texts, strict=True):
            text_hash = content_hash(text)
            is_new = text_hash not in new_hashes and self.store.find_by_hash(text_hash) is None
            if is_new and document.id is not None and self.store.get_document(document.id):
                raise DocumentConflict(
                    f"document {document.id!r} already exists with different content"
                )
            chunks = (
                chunk_text(text, self.tokenizer, self.chunk_tokens, self.chunk_tokens // 6)
                if is_new
                else []
            )
            new_hashes.add(text_hash)
            drafts.append(
                DocumentDraft(document.id, text_hash, document.metadata or {}, len(text), chunks)
            )
        return drafts


def _created_mask(drafts: list[DocumentDraft], insertions: list[Insertion]) -> np.ndarray:
    """Which embedded chunks belong to documents the store actually created."""
    mask: list[bool] = []
    for draft, insertion in zip(drafts, insertions, strict=True):
        mask += [insertion.created] * len(draft.chunks)
    return np.array(mask, dtype=bool)
