"""What an embedded engine is started with: the model, where it runs, and how vLLM runs it.

Built by the gateway from its settings (`gateway/loading.py`) and by benchmarks directly;
`engine.runtime.Engine` starts vLLM from it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from engine.contract import BlendSettings
from engine.platform import Device


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
    max_num_batched_tokens: int | None = None
    """Prompt tokens one engine step computes (vLLM's chunked prefill); None: what `vllm serve`
    takes on this hardware (the engine is configured as vLLM's OpenAI server is)."""
    cpu_compile: bool = False
    """Compile the model on CPU too (vLLM compiles on GPUs; on CPU it costs time at start)."""
    tensor_parallel_size: int = 1
    cpu_reserved_cores: int | None = None
    """Cores left to the scheduler and front end (`prepare_environment`); None: vLLM's rule."""
    blend: BlendSettings | None = None
    log_level: str = "info"
    served_model_name: str | None = None
    """The ``model_name`` label of vLLM's metrics; None: the model folder's path."""
    shared_records_dir: Path | None = None
    """A directory the servers of this machine share (the gateway's: beside the models), where
    vLLM's records of model classes are kept between data directories
    (`engine/model_records.py`); None: each cache directory makes its own."""
    profile_dir: Path | None = None
    """Where vLLM's torch profiler writes the engine core's traces (``start_profile``); None:
    profiling off. For benchmarks (load_tests/profile_blend.py), not for serving."""
