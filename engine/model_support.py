"""What a model's config allows: blending (its architecture and RoPE), and a tensor-parallel split.

Read from the model folder's ``config.json`` before the engine starts, so a model the blend
cannot serve is refused (or served without blending) with the reason, not failed mid-request.
"""

from __future__ import annotations

import json
from pathlib import Path

BLENDABLE_ARCHITECTURES = frozenset({"LlamaForCausalLM", "Qwen2ForCausalLM"})


def blending_unsupported_reason(model_dir: Path) -> str | None:
    """Why chunk-KV blending cannot run on this model, or None when it can."""
    config = json.loads((model_dir / "config.json").read_text())
    architectures = set(config.get("architectures") or [])
    if not architectures & BLENDABLE_ARCHITECTURES:
        return (
            f"architecture {sorted(architectures)} is not one of {sorted(BLENDABLE_ARCHITECTURES)}"
        )
    rope = config.get("rope_parameters") or config.get("rope_scaling") or {}
    rope_type = rope.get("rope_type", rope.get("type", "default"))
    if rope_type != "default":
        return f"RoPE type {rope_type!r} is not supported for key re-rotation"
    return None


def tensor_parallel_problem(model_dir: Path, tensor_parallel_size: int) -> str | None:
    """Why the model cannot be split across ``tensor_parallel_size`` ranks, or None.

    Each rank takes an equal share of the query heads and of the KV heads (vLLM also replicates
    KV heads when there are fewer than ranks, but then ranks hold copies of one head and the
    blend's per-head scores could no longer be summed across ranks).
    """
    if tensor_parallel_size == 1:
        return None
    config = json.loads((model_dir / "config.json").read_text())
    heads = int(config["num_attention_heads"])
    kv_heads = int(config.get("num_key_value_heads") or heads)
    if heads % tensor_parallel_size or kv_heads % tensor_parallel_size:
        return (
            f"tensor_parallel_size {tensor_parallel_size} must divide the model's "
            f"{heads} attention heads and {kv_heads} KV heads ({model_dir.name})"
        )
    return None
