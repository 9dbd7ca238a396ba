"""Search within vector stores: the library's search (dense, or hybrid: `gateway.openai.ranking`)
restricted to the stores' documents, then the attribute filter and the score threshold. Used by
``/v1/vector_stores/{id}/search`` and by the ``file_search`` tool. Blocking: run it in a thread."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from gateway.http.errors import APIError
from gateway.openai.filters import Filter, matches
from retriever import Hit, Library, RagObjects, Ranking, StoreFileRecord


@dataclass(frozen=True)
class StoreSearch:
    store_ids: Sequence[str]
    queries: Sequence[str]
    max_results: int
    ranking: Ranking
    condition: Filter | None = None
    score_threshold: float | None = None


@dataclass(frozen=True)
class FoundChunk:
    file: StoreFileRecord
    hit: Hit

    def result(self) -> dict[str, Any]:
        """One result as OpenAI's search and ``file_search_call.results`` report it."""
        return {
            "file_id": self.file.file_id,
            "filename": self.file.filename,
            "score": self.hit.score,
            "attributes": self.file.attributes,
            "text": self.hit.text,
        }


def check_stores(objects: RagObjects, store_ids: Sequence[str], param: str) -> None:
    """404 for a store that does not exist, 400 for one that expired."""
    for store_id in store_ids:
        record = objects.vector_stores.get(store_id)
        if record is None:
            raise APIError(
                404, f"No vector store found with id '{store_id}'.", param=param, code="not_found"
            )
        if record.status == "expired":
            raise APIError(400, f"Vector store '{store_id}' has expired.", param=param)


def search_stores(objects: RagObjects, library: Library, search: StoreSearch) -> list[FoundChunk]:
    """The best chunks of the stores' files that pass the filter, best first; the stores, files
    and chunks are all `objects`' project's."""
    check_stores(objects, search.store_ids, "vector_store_ids")
    objects.vector_stores.touch(search.store_ids)
    by_document: dict[str, StoreFileRecord] = {}
    for file in objects.vector_stores.searchable_files(search.store_ids):
        if search.condition is None or matches(search.condition, file.attributes):
            by_document.setdefault(file.document_id, file)
    if not by_document:
        return []
    best: dict[int, Hit] = {}
    for query in search.queries:
        hits = library.search(
            query,
            search.max_results,
            search.score_threshold,
            sorted(by_document),
            search.ranking,
            tenant=objects.tenant,
        )
        for hit in hits:
            if hit.chunk_id not in best or best[hit.chunk_id].score < hit.score:
                best[hit.chunk_id] = hit
    ranked = sorted(best.values(), key=lambda hit: -hit.score)[: search.max_results]
    return [FoundChunk(by_document[hit.document_id], hit) for hit in ranked]
