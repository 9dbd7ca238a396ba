"""The embedded vLLM engine: one ``AsyncLLM`` per process, fed token ids, streaming deltas."""

from __future__ import annotations

import copy
import logging
import os
import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from engine.connector.stats import StatsInbox
from engine.contract import BlendPlan, BlendSettings, BlendStats, StoreEvictions
from engine.model_records import shared_model_records
from engine.model_support import blending_unsupported_reason, tensor_parallel_problem
from engine.options import EngineOptions
from engine.platform import prepare_environment

if TYPE_CHECKING:
    from vllm import SamplingParams
    from vllm.outputs import RequestOutput

log = logging.getLogger(__name__)


class Engine:
    """Owns the vLLM ``AsyncLLM``. Construction is blocking (tens of seconds on CPU)."""

    def __init__(self, options: EngineOptions) -> None:
        problem = tensor_parallel_problem(options.model_dir, options.tensor_parallel_size)
        if problem is not None:
            raise ValueError(problem)
        prepare_environment(
            options.device,
            options.cache_dir,
            options.kv_cache_gib,
            options.log_level,
            options.tensor_parallel_size,
            options.cpu_reserved_cores,
            options.cpu_compile,
        )
        from vllm.config import StructuredOutputsConfig
        from vllm.engine.arg_utils import AsyncEngineArgs
        from vllm.usage.usage_lib import UsageContext
        from vllm.v1.engine.async_llm import AsyncLLM

        self.options = options
        self.blending = options.blend is not None
        self.stats_listener: Callable[[BlendStats], None] | None = None
        """Called (on the event loop) with the statistics of every blended request as it ends."""
        self.evictions_listener: Callable[[StoreEvictions], None] | None = None
        """Called (on the event loop) with the chunk store's evictions between requests."""
        kv_transfer_config = None
        self._stats_inbox: StatsInbox | None = None
        if options.blend is not None:
            reason = blending_unsupported_reason(options.model_dir)
            if reason is None:
                blend = replace(options.blend, stats_channel=uuid.uuid4().hex)
                kv_transfer_config = _connector_config(blend)
                self._stats_inbox = StatsInbox(blend.stats_channel, self._on_evictions)
            else:
                log.warning("blending off, every request is a full prefill: %s", reason)
                self.blending = False
        args = AsyncEngineArgs(
            model=str(options.model_dir),
            dtype=options.dtype,
            max_model_len=options.max_model_len,
            enable_prefix_caching=options.enable_prefix_caching,
            max_num_seqs=options.max_num_seqs,
            max_num_batched_tokens=options.max_num_batched_tokens,
            tensor_parallel_size=options.tensor_parallel_size,
            enforce_eager=options.device == "cpu" and not options.cpu_compile,
            gpu_memory_utilization=options.gpu_memory_utilization,
            served_model_name=options.served_model_name,
            disable_log_stats=True,  # no periodic log lines; the Prometheus logger still records
            kv_transfer_config=kv_transfer_config,
            profiler_config=_profiler_config(options.profile_dir),
            # Structured outputs on xgrammar ("auto"'s first choice), in compact JSON: small
            # models loop on free whitespace, and vLLM allows the setting on a named backend only.
            structured_outputs_config=StructuredOutputsConfig(
                backend="xgrammar", disable_any_whitespace=True
            ),
        )
        log.info("starting vLLM on %s with %s", options.device, options.model_dir)
        cache_root = Path(os.environ["VLLM_CACHE_ROOT"]).expanduser()  # the user's, or `cache_dir`
        with shared_model_records(cache_root, options.shared_records_dir):
            # As `vllm serve`: its defaults for the hardware (the step budget: 2,048 tokens per
            # CPU process, 8,192 on an H100 or H200; an embedded engine's would be 2,048 on all)
            self._llm = AsyncLLM.from_engine_args(
                args, usage_context=UsageContext.OPENAI_API_SERVER, stat_loggers=_stat_loggers()
            )
        self._sampling_defaults: dict[str, Any] | None = None

    @property
    def max_model_len(self) -> int:
        return self._llm.model_config.max_model_len

    @property
    def vocab_size(self) -> int:
        return self._llm.model_config.get_vocab_size()

    @property
    def max_logprobs(self) -> int:
        return self._llm.model_config.max_logprobs

    @property
    def sampling_defaults(self) -> dict[str, Any]:
        """The model's ``generation_config.json`` sampling defaults, read as ``vllm serve``
        reads them (``temperature``, ``top_p``, ``top_k``, ``min_p``, penalties, ``max_tokens``)."""
        if self._sampling_defaults is None:
            self._sampling_defaults = self._llm.model_config.get_diff_sampling_param()
        return self._sampling_defaults

    def verify(self, params: SamplingParams) -> None:
        """vLLM's own checks of ``params`` for this model (structured outputs' schema or grammar
        included), raising ``VLLMValidationError`` before any request is started."""
        config = self._llm.vllm_config
        params.verify(
            config.model_config,
            config.speculative_config,
            config.structured_outputs_config,
            self._llm.tokenizer,
        )

    @property
    def is_alive(self) -> bool:
        return not self._llm.errored

    async def generate(
        self,
        request_id: str,
        prompt_token_ids: list[int],
        params: SamplingParams,
        plan: BlendPlan | None = None,
        on_stats: Callable[[BlendStats], None] | None = None,
        cache_salt: str | None = None,
    ) -> AsyncIterator[RequestOutput]:
        """Yield vLLM ``RequestOutput`` deltas; closing the iterator aborts the request.

        ``plan`` rides to the connector with ``request_id`` as its ``stats_id``; when the request
        finishes, ``on_stats`` (then ``stats_listener``) is called with the worker's statistics,
        before the last output is yielded, if the worker blended it. The plan's recipe salts
        vLLM's prefix cache, so approximate (blended) KV never reaches exact requests; an
        explicit ``cache_salt`` replaces that salt.
        """
        from vllm.inputs import TokensPrompt

        prompt = TokensPrompt(prompt_token_ids=prompt_token_ids)
        inbox = self._stats_inbox if self.blending else None
        if plan is not None and inbox is not None:
            transfer = replace(plan, stats_id=request_id).to_params()
            if transfer:
                params = copy.copy(params)  # shared by a request's prompts; only this changes
                params.extra_args = {**(params.extra_args or {}), "kv_transfer_params": transfer}
            cache_salt = cache_salt or plan.cache_salt
            inbox.watch()
        if cache_salt is not None:
            prompt["cache_salt"] = cache_salt
        async for output in self._llm.generate(prompt, params, request_id=request_id):
            if output.finished and plan is not None and inbox is not None:
                self._report(inbox.collect(request_id), on_stats)
            yield output

    def _report(
        self, stats: BlendStats | None, on_stats: Callable[[BlendStats], None] | None
    ) -> None:
        if stats is None:
            return
        if on_stats is not None:
            on_stats(stats)
        if self.stats_listener is not None:
            self.stats_listener(stats)

    def _on_evictions(self, evictions: StoreEvictions) -> None:
        if self.evictions_listener is not None:
            self.evictions_listener(evictions)

    async def start_profile(self, name: str) -> None:
        """Start tracing the engine core (needs ``profile_dir``); its trace file names begin
        with ``name``."""
        await self._llm.start_profile(name)

    async def stop_profile(self) -> None:
        """Stop tracing; the trace is written under ``profile_dir`` before this returns."""
        await self._llm.stop_profile()

    def shutdown(self) -> None:
        self._llm.shutdown()
        if self._stats_inbox is not None:
            self._stats_inbox.close()


def _stat_loggers() -> list[object]:
    """vLLM's Prometheus stat logger alone: the ``vllm:*`` metrics (requests running and waiting,
    KV cache usage, latency histograms), recorded in this process from the engine core's stats
    into prometheus_client's default registry, which the gateway's ``/metrics`` exports."""
    from vllm.v1.metrics.loggers import PrometheusStatLogger

    return [PrometheusStatLogger]


def _profiler_config(profile_dir: Path | None) -> object:
    from vllm.config import ProfilerConfig

    if profile_dir is None:
        return ProfilerConfig()
    directory = str(profile_dir.resolve())
    return ProfilerConfig(
        profiler="torch", torch_profiler_dir=directory, torch_profiler_use_gzip=False
    )


def _connector_config(blend: BlendSettings) -> object:
    from vllm.config import KVTransferConfig

    return KVTransferConfig(
        kv_connector="RagblendConnector",
        kv_connector_module_path="engine.connector.connector",
        kv_role="kv_both",
        kv_connector_extra_config=blend.to_extra_config(),
    )
