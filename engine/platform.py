"""Pick the device and dtype, and set the process environment vLLM reads before it starts."""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Literal

Device = Literal["cpu", "cuda"]
Dtype = Literal["bfloat16", "float16", "float32"]
CPUINFO = Path("/proc/cpuinfo")
_NATIVE_BF16_FLAGS = {"avx512_bf16", "amx_bf16", "bf16"}
"""/proc/cpuinfo flags of CPUs that multiply bf16 in hardware (x86's two; Arm's ``bf16``)."""
SETTINGS_VARIABLES = (
    "VLLM_CACHE_ROOT",
    "VLLM_LOGGING_LEVEL",
    "VLLM_CPU_KVCACHE_SPACE",
    "VLLM_CPU_OMP_THREADS_BIND",
    "OMP_NUM_THREADS",
    "VLLM_CPU_NUM_OF_RESERVED_CPU",
    "VLLM_USE_AOT_COMPILE",
    "TORCHINDUCTOR_CACHE_DIR",
)
"""What `prepare_environment` derives from one server's settings into its own process's
environment: a process that has started an engine leaves these out of the environment of any
server it launches, which would otherwise take them as the user's explicit values."""
log = logging.getLogger(__name__)


def resolve_device(requested: Literal["auto", "cpu", "cuda"]) -> Device:
    if requested != "auto":
        return requested
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def resolve_dtype(requested: Literal["auto"] | Dtype, device: Device) -> Dtype:
    """``auto``: bf16 where the hardware multiplies it, else the fastest exact alternative.

    A CPU without native bf16 emulates it: on an AVX2-only EPYC a bf16 matmul ran at 17 GFLOP/s
    and float32 at 98, and a 414-token prefill of SmolLM2 took 5.8 s in bf16 and 1.1 s in float32.
    """
    if requested != "auto":
        return requested
    if device == "cuda":
        import torch

        return "bfloat16" if torch.cuda.is_bf16_supported() else "float16"
    return "bfloat16" if _cpu_flags() & _NATIVE_BF16_FLAGS else "float32"


def _cpu_flags() -> set[str]:
    try:
        text = CPUINFO.read_text()
    except OSError:
        return set()
    flags: set[str] = set()
    for line in text.splitlines():
        name, _, value = line.partition(":")
        if name.strip() in ("flags", "Features"):
            flags.update(value.split())
    return flags


def prepare_environment(
    device: Device,
    cache_dir: Path,
    kv_cache_gib: float,
    log_level: str,
    tensor_parallel_size: int = 1,
    reserved_cores: int | None = None,
    cpu_compile: bool = False,
) -> None:
    """Set vLLM's environment before the engine is created; explicit user values win.

    On CPU, ``reserved_cores`` are kept free of the model's compute threads for vLLM's
    scheduler, which spins while it waits for a step (None: vLLM's own rule, one per rank and
    one more for a KV connector; on 2 cores that reserves none).

    On CPU, vLLM runs one worker process per tensor-parallel rank and by default binds each
    rank's threads to a NUMA node of its own; with fewer nodes than ranks it refuses to start,
    so the ranks then share the cores unbound (``VLLM_CPU_OMP_THREADS_BIND=nobind``), each with
    its share of them as threads: every rank spins while it waits in a collective, so ranks
    with a thread per core each starve one another (measured on 2 cores, SmolLM2 split in 3: a
    blended request took 313 s with 2 threads per rank, 17 s with 1).

    A model compiled on CPU (``cpu_compile``) keeps its compiled code in ``cache_dir`` with the
    rest of the server's data, so a restart loads it: vLLM 0.32 saves an ahead-of-time artifact
    it cannot load back on CPU (it compiles there with torch's own inductor backend, and loading
    calls a method only its own backend's functions have), and compiled everything again at
    every start; without it, inductor's cache under ``cache_dir`` serves the restart.
    """
    cache_dir.mkdir(parents=True, exist_ok=True)
    defaults = {
        "VLLM_CACHE_ROOT": str(cache_dir.resolve()),
        "VLLM_NO_USAGE_STATS": "1",
        "VLLM_DO_NOT_TRACK": "1",
        "VLLM_LOGGING_LEVEL": log_level.upper(),
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "TOKENIZERS_PARALLELISM": "false",
    }
    if device == "cpu":
        defaults["VLLM_CPU_KVCACHE_SPACE"] = _gib_for_vllm(kv_cache_gib)
        if reserved_cores is not None:
            defaults["VLLM_CPU_NUM_OF_RESERVED_CPU"] = str(reserved_cores)
        if tensor_parallel_size > _numa_nodes():
            defaults["VLLM_CPU_OMP_THREADS_BIND"] = "nobind"
            cores = len(os.sched_getaffinity(0))
            defaults["OMP_NUM_THREADS"] = str(max(1, cores // tensor_parallel_size))
        if cpu_compile:
            defaults["VLLM_USE_AOT_COMPILE"] = "0"
            if _inductor_cache_is_torchs_default():
                os.environ.pop("TORCHINDUCTOR_CACHE_DIR", None)
            defaults["TORCHINDUCTOR_CACHE_DIR"] = str(cache_dir.resolve() / "inductor")
    kv_space = os.environ.get("VLLM_CPU_KVCACHE_SPACE")
    if device == "cpu" and kv_space not in (None, defaults["VLLM_CPU_KVCACHE_SPACE"]):
        log.warning(
            "VLLM_CPU_KVCACHE_SPACE=%s in the environment overrides RAGBLEND_KV_CACHE_GIB=%s",
            kv_space,
            kv_cache_gib,
        )
    for name, value in defaults.items():
        os.environ.setdefault(name, value)


def _inductor_cache_is_torchs_default() -> bool:
    """Whether TORCHINDUCTOR_CACHE_DIR holds what torch fills in itself when it is unset (importing
    vLLM does), rather than a value of the user's."""
    from torch._inductor.runtime.cache_dir_utils import default_cache_dir

    value = os.environ.get("TORCHINDUCTOR_CACHE_DIR")
    return value is not None and os.path.abspath(value) == os.path.abspath(default_cache_dir())


def _numa_nodes() -> int:
    return max(1, len(list(Path("/sys/devices/system/node").glob("node[0-9]*"))))


def _gib_for_vllm(gib: float) -> str:
    # vLLM parses this variable as an integer number of GiB.
    return str(max(1, round(gib)))
