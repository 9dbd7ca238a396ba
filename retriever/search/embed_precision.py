"""Which floating-point type the embedding model runs in.

Embedding chunks is most of an ingest's work on a CPU (MiniLM over every chunk). CPUs with
native bfloat16 arithmetic (AVX512-BF16 or AMX) run the model in bfloat16 about twice as fast
as in float32, with embeddings within a cosine of 0.998 of the float32 ones, which changes no
ranking that matters; elsewhere bfloat16 is emulated and slower, so `auto` keeps float32 there
(and on GPUs, where the model is cheap either way).
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

EmbeddingDtype = Literal["auto", "float32", "bfloat16"]
NATIVE_BF16_FLAGS = frozenset({"avx512_bf16", "amx_bf16"})
CPU_INFO = Path("/proc/cpuinfo")


def cpu_has_native_bf16(cpu_info: Path = CPU_INFO) -> bool:
    """Whether the CPU lists a bfloat16 instruction set among its flags (Linux)."""
    try:
        lines = cpu_info.read_text().splitlines()
    except OSError:
        return False
    flags = next((line for line in lines if line.startswith("flags")), "")
    return not NATIVE_BF16_FLAGS.isdisjoint(flags.partition(":")[2].split())


def resolved_dtype(requested: EmbeddingDtype, device: str) -> Literal["float32", "bfloat16"]:
    """`requested`, with `auto` made bfloat16 on a CPU that computes it natively, else float32."""
    if requested != "auto":
        return requested
    if device == "cpu" and cpu_has_native_bf16():
        return "bfloat16"
    return "float32"
