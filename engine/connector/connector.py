"""``RagblendConnector``: the vLLM KV connector that blends cached chunks into prompts.

vLLM loads this class by module path (``kv_connector_module_path``) in two roles. The scheduler
instance claims each blended request's chunk region as externally computed; the worker instance
fills those paged-cache slots with fused KV before the forward pass, so vLLM only computes the
rest of the prompt (the question) and decodes as usual. Per-request statistics go from the
worker straight to the front end that submitted the request (:mod:`engine.connector.stats`).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from vllm.distributed.kv_transfer.kv_connector.v1.base import (
    KVConnectorBase_V1,
    KVConnectorMetadata,
    KVConnectorRole,
)

from engine.connector.logs import log_like_vllm
from engine.connector.lookup import ChunkLookupClient
from engine.connector.metadata import BlendConnectorMetadata
from engine.connector.scheduler import BlendScheduler
from engine.connector.worker import BlendWorker
from engine.contract import BlendSettings

if TYPE_CHECKING:
    import torch
    from vllm.config import VllmConfig
    from vllm.forward_context import ForwardContext
    from vllm.v1.attention.backend import AttentionMetadata
    from vllm.v1.core.kv_cache_manager import KVCacheBlocks
    from vllm.v1.core.sched.output import SchedulerOutput
    from vllm.v1.kv_cache_interface import KVCacheConfig
    from vllm.v1.request import Request


class RagblendConnector(KVConnectorBase_V1):
    def __init__(
        self,
        vllm_config: VllmConfig,
        role: KVConnectorRole,
        kv_cache_config: KVCacheConfig | None = None,
    ) -> None:
        super().__init__(vllm_config, role, kv_cache_config)
        log_like_vllm()
        self._scheduler: BlendScheduler | None = None
        self._worker: BlendWorker | None = None
        self._bound_at = time.perf_counter()
        extra = self._kv_transfer_config.kv_connector_extra_config
        settings = BlendSettings.from_extra_config(extra)
        if role == KVConnectorRole.SCHEDULER:
            channel = settings.stats_channel
            lookup = ChunkLookupClient(channel) if channel else None
            self._scheduler = BlendScheduler(vllm_config.cache_config.block_size, lookup)
        else:
            on_cuda = vllm_config.device_config.device_type == "cuda"
            self._worker = BlendWorker(settings, vllm_config.cache_config.block_size, on_cuda)

    # Worker side

    def register_kv_caches(self, kv_caches: dict[str, torch.Tensor]) -> None:
        """Worker, once at start-up after the paged cache is allocated: finds the model on the
        calling model runner and fingerprints it for the chunk store's keys."""
        assert self._worker is not None
        self._worker.register(kv_caches)

    def start_load_kv(self, forward_context: ForwardContext, **kwargs: Any) -> None:
        """Worker, every step, before (or for steps without external loads, after) the forward
        pass: deletes the chunks this step's metadata evicts, then fills each new job's claimed
        slots with blended KV and posts its statistics. Returns when the slots are written. Raises
        only if an exact computation of a region fails too (the engine is then broken)."""
        assert self._worker is not None
        metadata = self._get_connector_metadata()
        assert isinstance(metadata, BlendConnectorMetadata)
        # Take the work out so that a second call in the same step does nothing.
        jobs, metadata.jobs = metadata.jobs, []
        evictions, metadata.evictions = metadata.evictions, []
        self._worker.evict(evictions)
        self._worker.run(jobs)

    def wait_for_layer_load(self, layer_name: str) -> None:
        """Worker: nothing to wait for, ``start_load_kv`` wrote every layer already."""
        return

    def save_kv_layer(
        self,
        layer_name: str,
        kv_layer: torch.Tensor,
        attn_metadata: AttentionMetadata,
        **kwargs: Any,
    ) -> None:
        return

    def wait_for_save(self) -> None:
        """Worker, every step, after the forward pass: copies the chunks of the first sightings
        vLLM prefilled in it out of the paged cache into the chunk store, and posts their
        statistics (blended jobs stored theirs in ``start_load_kv``). The store's slower tiers
        are written asynchronously."""
        assert self._worker is not None
        metadata = self._get_connector_metadata()
        assert isinstance(metadata, BlendConnectorMetadata)
        captures, metadata.captures = metadata.captures, []
        self._worker.capture(captures, time.perf_counter() - self._bound_at)

    def bind_connector_metadata(self, connector_metadata: KVConnectorMetadata) -> None:
        """Worker, every step, before the forward pass: notes when the step began."""
        super().bind_connector_metadata(connector_metadata)
        self._bound_at = time.perf_counter()

    def shutdown(self) -> None:
        """Either side, once when the engine stops: the worker flushes pending disk writes and
        closes its end of the statistics channel."""
        if self._worker is not None:
            self._worker.close()

    # Scheduler side

    def get_num_new_matched_tokens(
        self, request: Request, num_computed_tokens: int
    ) -> tuple[int | None, bool]:
        """Scheduler, each time a waiting request is considered: how many prompt tokens past
        vLLM's own prefix hit the worker will fill (the chunk region), loaded synchronously.
        A malformed plan claims nothing (the request is then a plain prefill)."""
        assert self._scheduler is not None
        return self._scheduler.num_new_matched_tokens(request, num_computed_tokens), False

    def on_new_request(self, request: Request) -> None:
        """Scheduler, once per request as it arrives: queues the chunk evictions it carries."""
        assert self._scheduler is not None
        self._scheduler.note_new_request(request)

    def update_state_after_alloc(
        self, request: Request, blocks: KVCacheBlocks, num_external_tokens: int
    ) -> None:
        """Scheduler, after blocks were allocated for a request: keeps its claim when vLLM
        granted the external tokens, drops it otherwise."""
        assert self._scheduler is not None
        self._scheduler.after_alloc(request, blocks, num_external_tokens)

    def build_connector_meta(self, scheduler_output: SchedulerOutput) -> KVConnectorMetadata:
        """Scheduler, once per step: the jobs (claimed requests scheduled now, new or resumed)
        and evictions the worker carries out in this step. Resets both."""
        assert self._scheduler is not None
        return self._scheduler.build_metadata(scheduler_output)

    def request_finished(
        self, request: Request, block_ids: list[int]
    ) -> tuple[bool, dict[str, Any] | None]:
        """Scheduler, when a request finishes or is aborted: forgets its claim; frees nothing
        asynchronously (False) and returns nothing to the client (the worker reported the
        request's statistics to the front end already)."""
        assert self._scheduler is not None
        self._scheduler.finished(request)
        return False, None
