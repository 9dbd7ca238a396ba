"""Worker half: fill each claimed prompt region with blended chunk KV, store missed chunks.

A job reads in three steps: ``_place`` sorts its chunks into verified hits and misses to
capture, ``_fill`` runs the blend and writes the paged cache, ``_store`` keeps what was
captured. Nothing read from the chunk store may take the engine down: an entry that fails
verification or reading is a miss (and deleted), and a blend that fails for any other reason
is redone as an exact computation of the claimed region, reported as ``fell_back``.
"""

from __future__ import annotations

import logging
import time
from typing import Any, TypeVar

import torch
from torch import Tensor

from engine.blend.fuse import Attend, CachedChunk, Selection, blend_prefill
from engine.connector.metadata import BlendJob
from engine.connector.model import VllmDecoder, find_model_runner_model
from engine.connector.paged_attention import CpuPagedAttention
from engine.connector.placement import Capture, ChunkUnreadable, Placement, cached_layers
from engine.connector.stats import StatsOutbox
from engine.contract import BlendSettings, BlendStats, SelectionOverrides
from engine.kvstore.expect import EntryExpectation
from engine.kvstore.keys import ChunkKey, model_fingerprint
from engine.kvstore.layer_format import LayerFormat
from engine.kvstore.load_meter import ComputeRate
from engine.kvstore.secret import chunk_kv_secret
from engine.kvstore.store import ChunkKVStore

log = logging.getLogger(__name__)
T = TypeVar("T")


class BlendWorker:
    """Lives in the model runner's process; every method runs in its thread, between steps."""

    def __init__(self, settings: BlendSettings, block_size: int) -> None:
        self.settings = settings
        self.block_size = block_size
        self.store = ChunkKVStore.create(
            settings.memory_bytes,
            settings.store_dir,
            settings.disk_bytes,
            secret=chunk_kv_secret(settings.secret_path, settings.shared_secret_hex),
            redis_url=settings.redis_url or None,
            redis_timeout_s=settings.redis_timeout_s,
            layer_format=LayerFormat[settings.slow_tier_format.upper()],
        )
        self.decoder: VllmDecoder | None = None
        self.fingerprint = ""
        self._compute_rate = ComputeRate()
        self._kv_caches: dict[str, Tensor] = {}
        self._outbox = StatsOutbox(settings.stats_channel)

    def register(self, kv_caches: dict[str, Tensor]) -> None:
        self._kv_caches = kv_caches
        decoder = self.decoder = VllmDecoder(find_model_runner_model())
        self.fingerprint = model_fingerprint(
            self.settings.model_name,
            str(decoder.dtype),
            decoder.num_layers,
            decoder.num_kv_heads,
            decoder.head_dim,
            extra=",".join(map(str, self.settings.chunk_prefix)),
        )

    def evict(self, chunks: list[list[int]]) -> None:
        for token_ids in chunks:
            self.store.delete(ChunkKey.for_chunk(self.fingerprint, token_ids))

    def run(self, jobs: list[BlendJob]) -> None:
        """Fill every job's claimed slots; raises only if even an exact computation fails."""
        for job in jobs:
            self._outbox.post(job.request_id, self._run_safely(job))

    def close(self) -> None:
        self.store.close()
        self._outbox.close()

    def _run_safely(self, job: BlendJob) -> BlendStats:
        unreadable: set[ChunkKey] = set()
        while True:
            try:
                return self._run(job, unreadable)
            except ChunkUnreadable as exc:
                log.warning("%s; treating it as a miss", exc)
                self.store.delete(exc.key)
                unreadable.add(exc.key)
            except Exception:
                log.exception("blending request %s failed; computing it exactly", job.request_id)
                return self._run_exact(job)

    def _run(self, job: BlendJob, unreadable: set[ChunkKey]) -> BlendStats:
        placement = self._place(job, unreadable)
        ratio = job.plan.effective_ratio if self._decoder.rope is not None else 1.0
        selection = self._selection(ratio, job.plan.overrides)
        started = time.perf_counter()
        result = self._fill(job, placement, selection)
        if not placement.hits:  # computed only: what a chunk costs to compute instead of load
            computed = result.recomputed_from(job.num_local_cached)
            self._compute_rate.record(time.perf_counter() - started, computed)
        self._store(placement.captures)
        # Positions before num_local_cached came from vLLM's prefix cache, not from this blend.
        return BlendStats(
            mode=job.plan.mode,
            reused_tokens=result.reused_from(job.num_local_cached),
            recomputed_tokens=result.recomputed_from(job.num_local_cached),
            chunks_hit=len(placement.hits),
            chunks_missed=len(placement.captures),
            prefix_cached_tokens=job.num_local_cached,
            rejected_chunks=placement.rejected,
            chunk_keys=tuple(placement.keys),
            evicted_keys=tuple(self.store.take_lost_keys()),
            store=self.store.stats(),
        )

    def _run_exact(self, job: BlendJob) -> BlendStats:
        """The claimed region computed exactly, as a full prefill would; nothing is stored."""
        self._fill(job, Placement(), Selection(1.0), capture=False)
        return BlendStats(
            mode=job.plan.mode,
            reused_tokens=0,
            recomputed_tokens=job.claim_end - job.num_local_cached,
            chunks_hit=0,
            chunks_missed=len(job.plan.spans),
            prefix_cached_tokens=job.num_local_cached,
            fell_back=True,
            evicted_keys=tuple(self.store.take_lost_keys()),
            store=self.store.stats(),
        )

    @property
    def _decoder(self) -> VllmDecoder:
        assert self.decoder is not None, "the connector claims nothing without a decoder"
        return self.decoder

    def _expectation(self, token_ids: list[int]) -> EntryExpectation:
        decoder = self._decoder
        return EntryExpectation(
            token_ids, decoder.num_layers, decoder.num_kv_heads, decoder.head_dim, decoder.dtype
        )

    def _place(self, job: BlendJob, unreadable: set[ChunkKey]) -> Placement:
        placement = Placement()
        reusable = self._decoder.rope is not None and job.plan.mode != "full"
        rejected_before = self._rejected()
        for span in job.plan.spans:
            if span.end > job.claim_end:
                break  # a chunk cut by the claim's end is computed like any uncached token
            chunk_tokens = job.token_ids[span.start : span.end]
            key = ChunkKey.for_chunk(self.fingerprint, chunk_tokens)
            placement.keys.append(key)
            stream = None
            if reusable and key not in unreadable:
                recompute_s = self._compute_rate.seconds_for(len(chunk_tokens))
                expected = self._expectation(chunk_tokens)
                stream = self.store.prefetch_layers(key, expected, recompute_s)
            if stream is not None:
                prefix_len = len(self.settings.chunk_prefix)
                placement.hits.append(
                    CachedChunk(span.start, span.end, prefix_len, cached_layers(stream, key))
                )
            else:
                placement.captures.append(Capture(key, span.start, span.end, chunk_tokens))
        placement.rejected = self._rejected() - rejected_before
        return placement

    def _rejected(self) -> int:
        return self.store.stats().get("rejected", 0)

    def _fill(
        self, job: BlendJob, placement: Placement, selection: Selection, capture: bool = True
    ) -> Any:
        """Blend the claimed region and write it into the paged cache; captures chunks that were
        computed in place exactly as alone."""
        decoder = self._decoder
        device = next(iter(self._kv_caches.values())).device
        slots = self._slots(job, device)
        attend = self._paged_attention(job)
        settled = self._settled(job, attend is not None, selection)
        in_place = [
            c
            for c in placement.captures
            if capture and c.start >= settled and self._computed_alone(job, c.start)
        ]

        def write(layer: int, keys: Tensor, values: Tensor) -> None:
            attention = decoder.attention_layer(layer)
            cache = self._kv_caches[attention.layer_name]
            first = job.num_local_cached
            attention.impl.do_kv_cache_update(
                attention, keys[first:].contiguous(), values[first:].contiguous(), cache, slots
            )
            for chunk in in_place:
                chunk.keys.append(keys[chunk.start : chunk.end].cpu())
                chunk.values.append(values[chunk.start : chunk.end].cpu())

        token_ids = torch.tensor(job.token_ids, device=device)
        question_start = job.plan.spans[-1].end
        return blend_prefill(
            decoder,
            token_ids,
            placement.hits,
            decoder.rope,
            selection,
            write,
            attend,
            question_start,
            settled,
        )

    def _store(self, captures: list[Capture]) -> None:
        device = next(iter(self._kv_caches.values())).device
        for capture in captures:
            if not capture.keys:
                self._compute_alone(capture, device)
            self.store.put(capture.key, capture.entry())

    @staticmethod
    def _settled(job: BlendJob, attention_reads_cache: bool, selection: Selection) -> int:
        """Leading positions vLLM's prefix cache already holds, which the blend can skip when its
        attention reads them from the paged cache (question attention needs their keys)."""
        if not attention_reads_cache or selection.metric == "attn":
            return 0
        return job.num_local_cached

    def _selection(self, ratio: float, overrides: SelectionOverrides) -> Selection:
        settings = self.settings
        heads = _first_set(overrides.chunk_head_tokens, settings.chunk_head_tokens)
        return Selection(
            ratio,
            _first_set(overrides.check_layers, settings.check_layers),
            _first_set(overrides.metric, settings.metric),
            _first_set(overrides.normalize, settings.normalize),
            0 if ratio == 0 else heads,
        )

    def _paged_attention(self, job: BlendJob) -> Attend | None:
        """vLLM's CPU kernel reads the fused KV back from the paged cache; else torch SDPA."""
        decoder = self._decoder
        layers = [decoder.attention_layer(i) for i in range(decoder.num_layers)]
        if type(layers[0].impl).__name__ != "CPUAttentionBackendImpl":
            return None
        paged = CpuPagedAttention(layers, self._kv_caches, job.block_ids)
        return lambda layer, q, _k, _v, positions: paged(layer, q, positions)

    def _computed_alone(self, job: BlendJob, start: int) -> bool:
        """A chunk right after the fixed prefix is computed in context exactly as alone."""
        prefix = list(self.settings.chunk_prefix)
        return start == len(prefix) and job.token_ids[:start] == prefix

    def _compute_alone(self, capture: Capture, device: torch.device) -> None:
        prefix = list(self.settings.chunk_prefix)
        ids = torch.tensor(prefix + capture.token_ids, device=device)

        def keep(_layer: int, keys: Tensor, values: Tensor) -> None:
            capture.keys.append(keys[len(prefix) :].cpu())
            capture.values.append(values[len(prefix) :].cpu())

        blend_prefill(self._decoder, ids, [], self._decoder.rope, Selection(1.0), keep)

    def _slots(self, job: BlendJob, device: torch.device) -> Tensor:
        positions = torch.arange(job.num_local_cached, job.claim_end)
        blocks = torch.tensor(job.block_ids)[positions // self.block_size]
        return (blocks * self.block_size + positions % self.block_size).to(device)


def _first_set(override: T | None, default: T) -> T:
    return default if override is None else override

