"""The document library the gateway uses: ingest, search, get, list and delete.

By default it lives under `data_dir` (`retriever.library.local_backend`: a SQLite file and a FAISS
index file, one process per `data_dir`). With a `database_url` it is the PostgreSQL library shared
by replicas (`retriever.library.shared_backend`: each keeps its index in memory and follows the
database).
A search ranks chunks by their embeddings, by the database's keyword index, or by both fused
(`retriever.search.ranking`); both indexes change in the transaction that stores or deletes.
Writes are serialized by one lock, held only for the database transaction and the index update:
chunking and embedding a batch happen before it is taken, so a large document does not hold up a
small one or a delete (`retriever.library.batch_preparation`). Searches run alongside writes.
With neighbour contexts, chunks whose nearest neighbours a batch joins or a delete leaves are
marked to be precomputed again (`retriever.library.neighbour_requeue`).
Each project names its documents in its own id space: ids are qualified by project on the way in
and stripped on the way out (`retriever.library.document_ids`), so callers only see their own.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import numpy as np

from retriever.ingest.chunking import Chunking, TextTokenizer
from retriever.library.batch_preparation import prepared_batch
from retriever.library.document_ids import client_chunk, client_document, client_id, stored_id
from retriever.library.documents import (
    Hit,
    IngestResult,
    MetadataCondition,
    NewDocument,
    key_chunking,
    validated_texts,
)
from retriever.library.drafts import DuplicateVanished
from retriever.library.interfaces import EVERY_PROJECT, LibraryBackend, LibraryStore
from retriever.library.local_backend import INDEX_FILE as INDEX_FILE
from retriever.library.local_backend import STORE_FILE as STORE_FILE
from retriever.library.local_backend import LocalBackend
from retriever.library.neighbour_requeue import contexts_holding, requeue
from retriever.library.reconcile import TextEmbedder
from retriever.library.records import ChunkRow, DocumentDraft, DocumentRow
from retriever.library.search_scope import search_scope
from retriever.library.shared_backend import SharedBackend
from retriever.search.index import IndexKind, VectorIndex
from retriever.search.neighbours import NeighbourPolicy
from retriever.search.ranking import (
    DENSE,
    RERANK_CANDIDATES,
    Ranking,
    Reranker,
    ranked_chunks,
)
from retriever.tenant import Tenant

log = logging.getLogger(__name__)


class Library:
    """Documents chunked by the served model's tokenizer, embedded, indexed and stored."""

    def __init__(
        self,
        data_dir: Path,
        tokenizer: TextTokenizer,
        embedder: TextEmbedder,
        index_kind: IndexKind = "flat",
        chunk_tokens: int = 384,
        database_url: str | None = None,
        neighbours: NeighbourPolicy | None = None,
        reranker: Reranker | None = None,
        rerank_candidates: int = RERANK_CANDIDATES,
    ) -> None:
        self.data_dir = Path(data_dir)
        self.tokenizer = tokenizer
        self.embedder = embedder
        self.default_chunking = Chunking(chunk_tokens)
        """How a document is chunked unless its ingest says otherwise."""
        self.neighbours = neighbours
        """How chunks' KV is computed behind neighbours; None: a fixed prefix, none requeued."""
        self.reranker = reranker
        """What reorders search candidates (`retriever.search.ranking.Reranker`); None: none."""
        self.rerank_candidates = rerank_candidates
        """How many of the ranking's best chunks the reranker reorders (at least `top_k`)."""
        self._write_lock = threading.Lock()
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.backend: LibraryBackend
        if database_url is None:
            self.backend = LocalBackend(self.data_dir, index_kind, embedder)
        else:
            self.backend = SharedBackend(database_url, index_kind, embedder.dim)

    @property
    def store(self) -> LibraryStore:
        return self.backend.store

    @property
    def index(self) -> VectorIndex:
        return self.backend.index

    def close(self) -> None:
        self.backend.close()

    def __enter__(self) -> Library:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def ingest(self, documents: Sequence[NewDocument], *, tenant: Tenant) -> list[IngestResult]:
        """Store and index a batch in `tenant`'s project; nothing is stored if any document is
        invalid or conflicts.

        Raises an `InvalidIngest` (a ValueError) for bad input and `DocumentConflict` when the
        project gave an id to different content already (another project's ids are its own).
        Content the project already stored comes back with `created=False`; another project's
        copy of the same text is not shared.
        """
        project, started = tenant.project, time.monotonic()
        texts = validated_texts(documents)
        drafts, vectors = self._prepare(documents, texts, project)
        with self._write_lock:
            try:
                insertions = self.backend.add(drafts, vectors)
            except DuplicateVanished:
                # Content this batch duplicated was deleted meanwhile: it needs chunks after all.
                drafts, vectors = self._prepare(documents, texts, project)
                insertions = self.backend.add(drafts, vectors)
        new_ids = [chunk_id for added in insertions for chunk_id in added.chunk_ids]
        # Mark stale the stored chunks whose context the new ones enter; the batch is stored
        # whatever happens here.
        requeue(self.store, self._contexts_holding(new_ids, "new"), "new")
        log.info(
            "ingested %d documents (%d new chunks) in %.1f s; the library has %d chunks",
            len(documents), len(new_ids), time.monotonic() - started, len(self.index),
        )  # fmt: skip
        return [
            IngestResult(
                id=client_id(insertion.document.id, project),
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
        ranking: Ranking = DENSE,
        *,
        tenant: Tenant,
        where: MetadataCondition | None = None,
    ) -> list[Hit]:
        """The `top_k` chunks of `tenant`'s project that best answer `query` by `ranking`
        (`retriever.search.ranking`), best first, optionally within documents, within those
        whose metadata passes `where` and at or above `min_score`. Both rankings search only
        the chunks `search_scope` allows; the chunks found are read back within the project
        either way. Hybrid runs the two searches at once (`ranked_chunks`)."""
        if not query.strip():
            raise ValueError("query is empty")
        if top_k < 1:
            raise ValueError(f"top_k must be at least 1, got {top_k}")
        project = tenant.project
        scope = search_scope(self.store, project, document_ids, where)
        if scope.empty:
            return []
        reranker = self.reranker if ranking.rerank else None
        scored = ranked_chunks(
            ranking,
            top_k if reranker is None else max(top_k, self.rerank_candidates),
            lambda n: self.index.search(self.embedder.embed([query])[0], n, scope.allowed),
            lambda n: self.store.keyword_search(
                query, n, scope.document_ids, project=project if scope.shared else EVERY_PROJECT
            ),
        )
        found = [chunk_id for chunk_id, _ in scored]
        rows = {row.id: row for row in self.store.chunks_for(found, project=project)}
        hits = [
            Hit.found(row, score, client_id(row.document_id, project))
            for chunk_id, score in scored
            if (row := rows.get(chunk_id)) is not None
        ]
        if reranker is not None:
            scores = reranker.scores(query, [hit.text for hit in hits])
            reranked = sorted(zip(scores, hits, strict=True), key=lambda pair: -pair[0])
            hits = [replace(hit, score=score) for score, hit in reranked]
        return [hit for hit in hits if min_score is None or hit.score >= min_score][:top_k]

    def get(self, doc_id: str, *, tenant: Tenant) -> DocumentRow | None:
        """`tenant`'s document `doc_id`; None when unknown or another project's."""
        project = tenant.project
        found = self.store.get_document(stored_id(doc_id, project), project=project)
        return None if found is None else client_document(found)

    def chunking_of(self, document_key: str) -> Chunking:
        """How a document is chunked, from its key (`DocumentRow.content_hash`)."""
        return key_chunking(document_key, self.default_chunking)

    def list(
        self, offset: int = 0, limit: int = 100, *, tenant: Tenant
    ) -> tuple[list[DocumentRow], int]:
        """A page of `tenant`'s documents, oldest first, and its total count."""
        rows, total = self.store.list_documents(project=tenant.project, offset=offset, limit=limit)
        return [client_document(row) for row in rows], total

    def delete(self, doc_id: str, *, tenant: Tenant) -> list[ChunkRow] | None:
        """Delete `tenant`'s document; returns its chunks (to drop their KV caches) or None if
        unknown (or another project's). With neighbour contexts, stored chunks computed behind
        one of its chunks are marked to be precomputed again: no KV goes on carrying a deleted
        document's text."""
        project = tenant.project
        stored = stored_id(doc_id, project)
        with self._write_lock:
            held = self._contexts_holding(
                sorted(self.store.chunk_ids([stored], project=project)), "deleted"
            )
            deleted = self.backend.delete(stored, project=project)
        if deleted:
            requeue(self.store, held - {row.id for row in deleted}, "deleted")
        return None if deleted is None else [client_chunk(row, project) for row in deleted]

    def _contexts_holding(self, chunk_ids: list[int], kind: str) -> set[int]:
        """Stored chunks computed behind one of `chunk_ids` (`contexts_holding`)."""
        return contexts_holding(self.neighbours, self.index, self.store, chunk_ids, kind)

    def _prepare(
        self, documents: Sequence[NewDocument], texts: list[str], project: str
    ) -> tuple[list[DocumentDraft], np.ndarray]:
        """The batch's drafts and chunk embeddings (`prepared_batch`), outside the lock."""
        return prepared_batch(
            documents,
            texts,
            project,
            self.store,
            self.tokenizer,
            self.embedder,
            self.default_chunking,
        )
