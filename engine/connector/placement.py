"""Where each chunk of a blend job comes from: the chunk store (hits) or this computation.

Every rank of a split model decides from its own store, cache of its own heads and its own
load-or-recompute estimate; a chunk is a hit only where every rank can load it, otherwise every
rank computes it (the forward's collectives need all ranks on one path). A hit whose stream turns
out corrupt midway is not raised into the forward, which other ranks run in lockstep: the
remaining layers are zeros, the chunk is noted in ``Placement.corrupt``, and the worker redoes
the job with that chunk as a miss.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import Tensor

from engine.blend.decoder import CachedChunk
from engine.connector.metadata import BlendJob
from engine.connector.ranks import RankGroup
from engine.kvstore.codec import CorruptEntry
from engine.kvstore.entry import ChunkKV
from engine.kvstore.expect import EntryExpectation
from engine.kvstore.keys import ChunkKey
from engine.kvstore.load_meter import ComputeRate
from engine.kvstore.prefetch import read_ahead
from engine.kvstore.store import ChunkKVStore

log = logging.getLogger(__name__)


@dataclass
class Capture:
    """Collects one span's fresh K/V, layer by layer, to store it as a chunk."""

    key: ChunkKey
    start: int
    end: int
    token_ids: list[int]
    keys: list[Tensor] = field(default_factory=list)
    values: list[Tensor] = field(default_factory=list)
    in_context: bool = False
    """Its K/V were computed where it stands in the job's prompt, behind the tokens before it
    there (its keys are then moved to where the chunk prefix ends before it is stored)."""

    def entry(self) -> ChunkKV:
        return ChunkKV(torch.stack(self.keys), torch.stack(self.values), self.token_ids)


@dataclass
class Placement:
    """Where each chunk of a job comes from: the store (hits) or this computation (captures)."""

    hits: list[CachedChunk] = field(default_factory=list)
    captures: list[Capture] = field(default_factory=list)
    keys: list[ChunkKey] = field(default_factory=list)
    """Every placed chunk's key, hit or captured, in prompt order."""
    hit_positions: list[int] = field(default_factory=list)
    """Positions (in ``keys``) of the hits."""
    rejected: int = 0
    corrupt: set[ChunkKey] = field(default_factory=set)
    """Hits whose stream failed verification while the blend read it (filled with zeros)."""

    @property
    def first_reused(self) -> int | None:
        """Where the first hit starts: every token before it is computed exactly here."""
        return min((hit.start for hit in self.hits), default=None)

    def stored_in_context(self, job: BlendJob, prefix: list[int]) -> tuple[int, ...]:
        """Positions (in ``keys``) of the captures stored as computed behind the job's own
        context, not right behind the fixed ``prefix`` (`BlendStats.stored_in_context`)."""
        return tuple(
            self.keys.index(capture.key)
            for capture in self.captures
            if capture.in_context and not job.behind_fixed_prefix(prefix, capture.start)
        )


class ChunkPlacer:
    """Sorts a job's chunks into hits and captures, the same way on every rank.

    With a `compute_rate`, a slow tier's hit that would load slower than the chunk computes is
    left to compute (`ChunkKVStore.open_layers`); without one every hit is loaded. The hits are
    read ahead on one thread, layer by layer across chunks (`prefetch.read_ahead`).
    """

    def __init__(
        self,
        store: ChunkKVStore,
        ranks: RankGroup,
        compute_rate: ComputeRate | None,
        chunk_prefix_len: int,
        expectation: Callable[[Sequence[int]], EntryExpectation],
    ) -> None:
        self.store = store
        self.ranks = ranks
        self.compute_rate = compute_rate
        self.chunk_prefix_len = chunk_prefix_len
        self.expectation = expectation

    def place(
        self, job: BlendJob, fingerprint: str, reusable: bool, unreadable: set[ChunkKey]
    ) -> Placement:
        """Open every chunk this rank can load (unless not ``reusable``), then keep as hits only
        those every rank opened; a chunk cut by the claim's end is computed like any uncached
        token. Chunks in ``unreadable`` turned out corrupt before and are misses, as is every
        chunk of a plan that replaces stored entries."""
        placement = Placement()
        rejected_before = self._rejected()
        spans = [span for span in job.plan.spans if span.end <= job.claim_end]
        streams: list[Any] = []
        for span in spans:
            chunk_tokens = job.token_ids[span.start : span.end]
            key = ChunkKey.for_chunk(fingerprint, chunk_tokens, job.plan.kv_salt)
            placement.keys.append(key)
            loads = reusable and key not in unreadable and not job.plan.replace_stored
            streams.append(self._open(key, chunk_tokens) if loads else None)
        everywhere = self.ranks.all_can([stream is not None for stream in streams])
        for stream, loadable in zip(streams, everywhere, strict=True):
            if stream is not None and not loadable:  # loadable here, not on another rank
                stream.close()
        loading = iter(read_ahead([s for s, ok in zip(streams, everywhere, strict=True) if ok]))
        for position, (span, key, loadable) in enumerate(
            zip(spans, placement.keys, everywhere, strict=True)
        ):
            chunk_tokens = job.token_ids[span.start : span.end]
            if loadable:
                placement.hit_positions.append(position)
                expected = self.expectation(chunk_tokens)
                layers = cached_layers(next(loading), key, expected, placement)
                placement.hits.append(
                    CachedChunk(span.start, span.end, self.chunk_prefix_len, layers)
                )
            else:
                placement.captures.append(Capture(key, span.start, span.end, chunk_tokens))
        placement.rejected = self._rejected() - rejected_before
        return placement

    def _open(self, key: ChunkKey, chunk_tokens: list[int]) -> Any:
        """This rank's stream of the chunk, or None; never raises (other ranks wait to agree)."""
        try:
            rate = self.compute_rate
            recompute_s = None if rate is None else rate.seconds_for(len(chunk_tokens))
            return self.store.open_layers(key, self.expectation(chunk_tokens), recompute_s)
        except Exception:
            log.exception("opening cached chunk %s failed; computing it", key)
            return None

    def _rejected(self) -> int:
        return self.store.stats().get("rejected", 0)


def cached_layers(
    stream: Any, key: ChunkKey, expected: EntryExpectation, placement: Placement
) -> Iterator[tuple[Tensor, Tensor]]:
    """The stream's (keys, values) per layer; after a corrupt layer, zeros for the rest."""
    shape = (len(expected.token_ids), expected.num_kv_heads, expected.head_dim)
    served = 0
    try:
        for _, keys, values in stream:
            served += 1
            yield keys, values
    except CorruptEntry as error:
        log.warning("cached chunk %s failed while loading (%s); treating it as a miss", key, error)
        placement.corrupt.add(key)
    finally:
        stream.close()
    for _ in range(served, expected.num_layers):
        zeros = torch.zeros(shape, dtype=expected.dtype)
        yield zeros, zeros
