"""Worker half: fill each claimed prompt region with blended chunk KV, store missed chunks.

A job reads in three steps: placing sorts its chunks into verified hits and misses to capture
(:mod:`engine.connector.placement`), ``_fill`` runs the blend and writes the paged cache,
:mod:`engine.connector.miss_store` stores the missed chunks. Nothing read from the chunk store
may take the engine down: an entry that fails verification or reading is a miss (and deleted),
and a blend that fails for any other reason is redone as an exact computation of the claimed
region, reported as ``fell_back``. Under tensor parallelism every rank runs each job over its
own KV heads; each of these outcomes is agreed between ranks (:mod:`engine.connector.ranks`)
before it changes the path, and only one rank reports the statistics.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence

import torch
from torch import Tensor

from engine.blend.fuse import Attend, BlendResult, LayerHooks, PlacedChunks, Prompt, blend_prefill
from engine.connector import report
from engine.connector.capture import PagedCapture
from engine.connector.lookup import ChunkLookupServer
from engine.connector.metadata import BlendJob
from engine.connector.miss_store import MissStore
from engine.connector.model import VllmDecoder, find_model_runner_model
from engine.connector.paged_attention import CpuPagedAttention, paged_kernel_preferred
from engine.connector.placement import ChunkPlacer, Placement
from engine.connector.ranks import RankGroup
from engine.connector.stats import StatsOutbox
from engine.contract import BlendSettings, BlendStats, Eviction, Recipe
from engine.kvstore.expect import EntryExpectation
from engine.kvstore.keys import ChunkKey, model_fingerprint
from engine.kvstore.layer_format import LayerFormat
from engine.kvstore.load_meter import ComputeRate
from engine.kvstore.secret import chunk_kv_secret
from engine.kvstore.store import ChunkKVStore

log = logging.getLogger(__name__)


class BlendWorker:
    """In the model runner's process, its thread, between steps (``_stored``: lookups' thread)."""

    def __init__(self, settings: BlendSettings, block_size: int, on_cuda: bool = False) -> None:
        """``on_cuda``: the model runs on a CUDA GPU, where the memory tier keeps chunk KV in
        pinned memory."""
        self.settings = settings
        self.block_size = block_size
        self.ranks = ranks = RankGroup.of_this_worker()
        split = ranks.world_size  # each rank holds its share of every chunk's heads
        disk_bytes = None if settings.disk_bytes is None else settings.disk_bytes // split
        self.store = ChunkKVStore.create(
            settings.memory_bytes // split,
            settings.rank_store_dir(ranks.rank, ranks.world_size),
            disk_bytes,
            secret=chunk_kv_secret(settings.secret_path, settings.shared_secret_hex),
            redis_url=settings.redis_url or None,
            redis_timeout_s=settings.redis_timeout_s,
            layer_format=LayerFormat[settings.slow_tier_format.upper()],
            pinned=on_cuda,
        )
        self.decoder: VllmDecoder | None = None
        self.fingerprint = ""
        self._compute_rate = ComputeRate()
        self._kv_caches: dict[str, Tensor] = {}
        self._reports = report.Reporter(self.store, StatsOutbox(settings.stats_channel))
        if ranks.reports and settings.stats_channel:
            self.store.after_backing_write(self._reports.evictions)
        self._lookup: ChunkLookupServer | None = None
        self._capture: PagedCapture | None = None
        self._prefix = list(settings.chunk_prefix)

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
            tp_rank=self.ranks.rank,
            tp_size=self.ranks.world_size,
        )
        self._misses = MissStore(self.store, self.settings.chunk_prefix)
        self._capture = PagedCapture.create(decoder, self._kv_caches, self._misses)
        if self.ranks.reports and self.settings.stats_channel:
            captures = self._capture is not None
            self._lookup = ChunkLookupServer(self.settings.stats_channel, self._stored, captures)
        self._placer = ChunkPlacer(
            self.store,
            self.ranks,
            self._compute_rate if self.settings.recompute_when_faster else None,
            len(self.settings.chunk_prefix),
            self._expectation,
        )

    def evict(self, evictions: list[Eviction]) -> None:
        for salt, token_ids in evictions:
            self.store.delete(ChunkKey.for_chunk(self.fingerprint, token_ids, salt))

    def _stored(self, salt: str, chunks: list[list[int]]) -> list[bool]:
        """Whether each chunk is in the store (any tier), for the scheduler's lookup thread."""
        keys = (ChunkKey.for_chunk(self.fingerprint, chunk, salt) for chunk in chunks)
        return [self.store.contains(key) for key in keys]

    def capture(self, jobs: list[BlendJob], forward_s: float) -> None:
        """After the forward (``forward_s`` long): store the chunks of each first sighting vLLM
        just prefilled; their tokens over the forward's time teach what computing costs."""
        if jobs:
            computed = sum(job.claim_end - job.num_local_cached for job in jobs)
            self._compute_rate.record(forward_s, computed)
        for job in jobs:
            try:
                assert self._capture is not None, "the scheduler leaves nothing to a worker without"
                started = time.perf_counter()
                placement = self._capture.run(job, self.fingerprint)
                log.debug("stored %d chunks of request %s from the paged cache in %.1f ms",
                          len(placement.captures), job.request_id,
                          (time.perf_counter() - started) * 1e3)  # fmt: skip
                stats = report.captured(job, placement, self._prefix)
            except Exception:
                log.exception("storing the chunks of request %s failed", job.request_id)
                continue
            if self.ranks.reports and job.plan.stats_id:
                self._reports.job(job.plan.stats_id, stats)

    def run(self, jobs: list[BlendJob]) -> None:
        """Fill every job's claimed slots; raises only if even an exact computation fails."""
        for job in jobs:
            stats = self._run_safely(job)
            if self.ranks.reports and job.plan.stats_id:
                self._reports.job(job.plan.stats_id, stats)

    def close(self) -> None:
        if self._lookup is not None:
            self._lookup.close()
        self.store.close()  # its last writes may post evictions
        self._reports.close()

    def _run_safely(self, job: BlendJob) -> BlendStats:
        """Blend the job; every rank returns after the same attempts and the same fallback."""
        unreadable: set[ChunkKey] = set()
        while True:
            outcome = self._attempt(job, unreadable)
            if self.ranks.any(outcome is None):
                return self._run_exact(job)
            placement, result = outcome
            if not self.ranks.any(bool(placement.corrupt)):
                break
            for key in placement.corrupt:  # every rank redoes the job, these as misses
                self.store.delete(key)
                unreadable.add(key)
        try:  # the paged cache is filled: a chunk not stored is only a later miss
            device = next(iter(self._kv_caches.values())).device
            self._misses.put(self._decoder, job, placement, device)
        except Exception:
            log.exception("storing the chunks of request %s failed", job.request_id)
        return report.blended(job, placement, result, self._prefix)

    def _attempt(
        self, job: BlendJob, unreadable: set[ChunkKey]
    ) -> tuple[Placement, BlendResult] | None:
        """Place and blend once, or None when blending failed."""
        try:
            return self._run(job, unreadable)
        except Exception:
            log.exception("blending request %s failed; computing it exactly", job.request_id)
            return None

    def _run(self, job: BlendJob, unreadable: set[ChunkKey]) -> tuple[Placement, BlendResult]:
        rotates = self._decoder.rope is not None
        reusable = rotates and job.plan.recipe.mode != "full"
        placement = self._placer.place(job, self.fingerprint, reusable, unreadable)
        recipe = job.plan.recipe if rotates else Recipe.exact()
        started = time.perf_counter()
        result = self._fill(job, placement, recipe)
        if not placement.hits:  # computed only: what a chunk costs to compute instead of load
            computed = result.recomputed_from(job.num_local_cached)
            self._compute_rate.record(time.perf_counter() - started, computed)
        return placement, result

    def _run_exact(self, job: BlendJob) -> BlendStats:
        """The claimed region computed exactly, as a full prefill would; nothing is stored."""
        self._fill(job, Placement(), Recipe.exact(), capture=False)
        return report.fell_back(job)

    @property
    def _decoder(self) -> VllmDecoder:
        assert self.decoder is not None, "the connector claims nothing without a decoder"
        return self.decoder

    def _expectation(self, token_ids: Sequence[int]) -> EntryExpectation:
        decoder = self._decoder
        return EntryExpectation(
            token_ids, decoder.num_layers, decoder.num_kv_heads, decoder.head_dim, decoder.dtype
        )

    def _fill(
        self, job: BlendJob, placement: Placement, recipe: Recipe, capture: bool = True
    ) -> BlendResult:
        """Blend the claimed region and write it into the paged cache; captures the missed
        chunks whose KV from this pass is stored (`BlendJob.kept_as_computed`)."""
        decoder = self._decoder
        device = next(iter(self._kv_caches.values())).device
        slots = job.slots(self.block_size, device)
        attend = self._paged_attention(job, recipe)
        settled = job.settled(attend is not None, recipe)
        rotates, first = decoder.rope is not None, placement.first_reused
        in_place = [
            c
            for c in (placement.captures if capture else [])
            if c.start >= settled and job.kept_as_computed(self._prefix, c.start, first, rotates)
        ]
        for chunk in in_place:
            chunk.in_context = True

        def write(layer: int, keys: Tensor, values: Tensor) -> None:
            attention = decoder.attention_layer(layer)
            cache = self._kv_caches[attention.layer_name]
            first = job.num_local_cached
            attention.impl.do_kv_cache_update(
                attention, keys[first:].contiguous(), values[first:].contiguous(), cache, slots
            )
            for chunk in in_place:  # copied to host memory without waiting: see the fill's end
                for kept, fused in ((chunk.keys, keys), (chunk.values, values)):
                    rows = fused[chunk.start : chunk.end]
                    kept.append(rows.to("cpu", non_blocking=True, copy=True))

        token_ids = torch.tensor(job.token_ids, device=device)
        prompt = Prompt(token_ids, question_start=job.plan.spans[-1].end, settled=settled)
        cached = PlacedChunks(placement.hits, decoder.rope, len(job.token_ids), device)
        hooks = LayerHooks(write, attend)
        result = blend_prefill(decoder, prompt, cached, recipe, hooks, self.ranks.sum_heads)
        if in_place and device.type == "cuda":
            torch.cuda.current_stream(device).synchronize()  # the captures have reached the host
        return result

    def _paged_attention(self, job: BlendJob, recipe: Recipe) -> Attend | None:
        """vLLM's CPU kernel over the paged cache where it holds settled positions or is faster."""
        layers = [self._decoder.attention_layer(i) for i in range(self._decoder.num_layers)]
        on_cpu = type(layers[0].impl).__name__ == "CPUAttentionBackendImpl"
        if not on_cpu or not (job.settled(True, recipe) or paged_kernel_preferred(layers[0].isa)):
            return None
        paged = CpuPagedAttention(layers, self._kv_caches, job.block_ids)
        return lambda layer, q, _k, _v, positions: paged(layer, q, positions)
