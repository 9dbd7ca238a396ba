"""``RagblendConnector``: the vLLM KV connector that blends cached chunks into prompts.

vLLM loads this class by module path (``kv_connector_module_path``) in two roles. The scheduler
instance claims each blended request's chunk region as externally computed; the worker instance
fills those paged-cache slots with fused KV before the forward pass, so vLLM only computes the
rest of the prompt (the question) and decodes as usual. Per-request statistics flow back
worker -> scheduler (:mod:`engine.connector.stats`) -> ``RequestOutput.kv_transfer_params``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from vllm.distributed.kv_transfer.kv_connector.v1.base import (
    KVConnectorBase_V1,
    KVConnectorMetadata,
    KVConnectorRole,
)

from engine.connector.metadata import BlendConnectorMetadata
from engine.connector.scheduler import BlendScheduler
from engine.connector.settings import BlendSettings
from engine.connector.stats import StatsMailbox
from engine.connector.worker import BlendWorker

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
        self._scheduler: BlendScheduler | None = None
        self._worker: BlendWorker | None = None
        extra = self._kv_transfer_config.kv_connector_extra_config
        settings = BlendSettings.from_extra_config(extra)
        if role == KVConnectorRole.SCHEDULER:
            self._scheduler = BlendScheduler(StatsMailbox(settings.stats_dir), settings.metric)
        else:
            self._worker = BlendWorker(settings, vllm_config.cache_config.block_size)

    # Worker side

    def register_kv_caches(self, kv_caches: dict[str, torch.Tensor]) -> None:
        assert self._worker is not None
        self._worker.register(kv_caches)

    def start_load_kv(self, forward_context: ForwardContext, **kwargs: Any) -> None:
        assert self._worker is not None
        metadata = self._get_connector_metadata()
        assert isinstance(metadata, BlendConnectorMetadata)
        # Take the work out so that a second call in the same step does nothing.
        jobs, metadata.jobs = metadata.jobs, []
        evictions, metadata.evictions = metadata.evictions, []
        self._worker.evict(evictions)
        self._worker.run(jobs)

    def wait_for_layer_load(self, layer_name: str) -> None:
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
        return

    def shutdown(self) -> None:
        if self._worker is not None:
            self._worker.store.close()

    # Scheduler side

    def get_num_new_matched_tokens(
        self, request: Request, num_computed_tokens: int
    ) -> tuple[int | None, bool]:
        assert self._scheduler is not None
        return self._scheduler.num_new_matched_tokens(request, num_computed_tokens), False

    def on_new_request(self, request: Request) -> None:
        assert self._scheduler is not None
        self._scheduler.note_new_request(request)

    def update_state_after_alloc(
        self, request: Request, blocks: KVCacheBlocks, num_external_tokens: int
    ) -> None:
        assert self._scheduler is not None
        self._scheduler.after_alloc(request, blocks, num_external_tokens)

    def build_connector_meta(self, scheduler_output: SchedulerOutput) -> KVConnectorMetadata:
        assert self._scheduler is not None
        return self._scheduler.build_metadata(scheduler_output)

    def request_finished(
        self, request: Request, block_ids: list[int]
    ) -> tuple[bool, dict[str, Any] | None]:
        assert self._scheduler is not None
        return False, self._scheduler.finished(request)
