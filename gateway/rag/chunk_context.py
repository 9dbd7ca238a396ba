"""What a library chunk's KV is precomputed behind, with `RAGBLEND_CHUNK_CONTEXT=neighbours`.

A retrieved chunk stands behind other retrieved chunks, which tend to be its nearest neighbours
in the index. So its KV is computed behind them (after the fixed chunk prefix, which the engine
adds): its `k` nearest other chunks, most similar last, each followed by the separator that
retrieval puts after a chunk, exactly as they would stand in a prompt. The cached KV then carries
cross-attention to text like what it meets when served. With `passages` there is no context and
the fixed prefix alone stands before every chunk, as it does for sent `documents` in any case.
"""

from __future__ import annotations

from typing import Any

from gateway.rag.chunked_prompt import chunk_separator
from retriever import ChunkRow, Library, context_order, nearest_chunks


class NeighbourContext:
    """Token ids of the chunks that stand before a library chunk when its KV is computed."""

    def __init__(self, library: Library, tokenizer: Any, neighbours: int) -> None:
        self.library = library
        self.neighbours = neighbours
        self.separator = chunk_separator(tokenizer)

    def of(self, chunk: ChunkRow, project: str) -> list[list[int]] | None:
        """Its nearest chunks' token ids, most similar last, only of its own `project` (no KV
        carries another project's text); None when it has no neighbour yet (alone in the
        library, or not yet in this replica's index): the fixed prefix alone."""
        nearest = nearest_chunks(self.library.index, chunk.id, self.neighbours)
        if not nearest:
            return None
        rows = self.library.store.chunks_for(context_order(nearest), project=project)
        return [row.token_ids + self.separator for row in rows] or None
