"""The embedded vLLM engine: one ``AsyncLLM`` per process, fed token ids, streaming deltas."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from engine.platform import Device, prepare_environment

if TYPE_CHECKING:
    from vllm import SamplingParams
    from vllm.outputs import RequestOutput

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class EngineOptions:
    model_dir: Path
    device: Device
    cache_dir: Path
    max_model_len: int
    dtype: str
    kv_cache_gib: float
    gpu_memory_utilization: float
    enable_prefix_caching: bool
    max_num_seqs: int
    log_level: str = "info"


class Engine:
    """Owns the vLLM ``AsyncLLM``. Construction is blocking (tens of seconds on CPU)."""

    def __init__(self, options: EngineOptions) -> None:
        prepare_environment(
            options.device, options.cache_dir, options.kv_cache_gib, options.log_level
        )
        from vllm.engine.arg_utils import AsyncEngineArgs
        from vllm.v1.engine.async_llm import AsyncLLM

        self.options = options
        args = AsyncEngineArgs(
            model=str(options.model_dir),
            dtype=options.dtype,
            max_model_len=options.max_model_len,
            enable_prefix_caching=options.enable_prefix_caching,
            max_num_seqs=options.max_num_seqs,
            enforce_eager=options.device == "cpu",
            gpu_memory_utilization=options.gpu_memory_utilization,
            disable_log_stats=True,
        )
        log.info("starting vLLM on %s with %s", options.device, options.model_dir)
        self._llm = AsyncLLM.from_engine_args(args)

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
    def is_alive(self) -> bool:
        return not self._llm.errored

    async def generate(
        self, request_id: str, prompt_token_ids: list[int], params: SamplingParams
    ) -> AsyncIterator[RequestOutput]:
        """Yield vLLM ``RequestOutput`` deltas; closing the iterator aborts the request."""
        from vllm.inputs import TokensPrompt

        prompt = TokensPrompt(prompt_token_ids=prompt_token_ids)
        async for output in self._llm.generate(prompt, params, request_id=request_id):
            yield output

    def shutdown(self) -> None:
        self._llm.shutdown()
