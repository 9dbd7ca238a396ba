"""Which stored chunks must be precomputed again when the library changes around them.

With neighbour contexts a chunk's KV is computed behind its nearest other chunks; a batch that
joins a chunk's neighbourhood, or a delete that takes a neighbour away, leaves that KV computed
behind the wrong text. Such chunks are found from the index (`retriever.search.neighbours`) and
marked stale in the store, to be precomputed again. A failure here is logged, never raised: the
change it follows is already stored.
"""

from __future__ import annotations

import logging

from retriever.library.interfaces import EVERY_PROJECT, LibraryStore
from retriever.search.index import VectorIndex
from retriever.search.neighbours import NeighbourPolicy, joined_neighbourhoods, within_window

log = logging.getLogger(__name__)


def contexts_holding(
    policy: NeighbourPolicy | None,
    index: VectorIndex,
    store: LibraryStore,
    chunk_ids: list[int],
    kind: str,
) -> set[int]:
    """Other chunks whose neighbour context holds (or, for chunks just indexed, now would
    hold) one of `chunk_ids` in the part the engine keeps (see `retriever.search.neighbours`);
    empty without neighbour contexts (`policy` None). A failure is logged, not raised."""
    if policy is None or not chunk_ids:
        return set()
    try:
        joined = joined_neighbourhoods(index, chunk_ids, policy.count)
        nearer = sorted({other for others in joined.values() for other in others})
        lengths = {
            row.id: len(row.token_ids) for row in store.chunks_for(nearer, project=EVERY_PROJECT)
        }
        return within_window(joined, lengths, policy.window_tokens)
    except Exception:
        log.exception("could not find the neighbours of %d %s chunks", len(chunk_ids), kind)
        return set()


def requeue(store: LibraryStore, chunk_ids: set[int], kind: str) -> None:
    """Mark `chunk_ids` stale in `store` (near `kind` chunks: new or deleted ones). A failure
    is logged, not raised."""
    if not chunk_ids:
        return
    try:
        requeued = store.requeue_chunks(sorted(chunk_ids))
    except Exception:
        log.exception("could not requeue %d chunks near %s ones", len(chunk_ids), kind)
        return
    if requeued:
        log.info("%s chunks changed the neighbours of %d stored ones", kind, len(requeued))
