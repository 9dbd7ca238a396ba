"""Drive a vLLM Llama/Qwen2 model's own modules layer by layer, and check its rotary embedding."""

from __future__ import annotations

import inspect
import logging
from typing import Any

import torch
from torch import Tensor, nn

from engine.blend.rope import RopeSpec, UnsupportedRope, rotate_keys

log = logging.getLogger(__name__)

SUPPORTED_ARCHITECTURES = frozenset({"LlamaForCausalLM", "Qwen2ForCausalLM"})
ROTATION_TOLERANCE = 0.05
"""Relative error allowed between re-rotated keys and the model's own rotation (bf16 tables)."""


class UnsupportedModel(RuntimeError):
    """Blending cannot run on this model; requests fall back to a full prefill."""


def find_model_runner_model() -> nn.Module:
    """The model of the vLLM model runner that is calling us (register_kv_caches' caller)."""
    for frame_info in inspect.stack():
        runner = frame_info.frame.f_locals.get("self")
        if runner is not None and callable(getattr(runner, "get_model", None)):
            try:
                return runner.get_model()
            except Exception:  # a runner whose model is not loaded yet; keep looking up
                continue
    raise UnsupportedModel("no vLLM model runner found on the call stack")


class VllmDecoder:
    """A :class:`engine.blend.fuse.DecoderAdapter` over a vLLM decoder-only model."""

    def __init__(self, model: nn.Module) -> None:
        name = type(model).__name__
        if name not in SUPPORTED_ARCHITECTURES:
            raise UnsupportedModel(f"{name} is not a supported architecture for blending")
        self.model = model.model
        self.blocks = list(self.model.layers)
        attention = self.blocks[0].self_attn
        self.num_layers = len(self.blocks)
        self.num_heads = attention.num_heads
        self.num_kv_heads = attention.num_kv_heads
        self.head_dim = attention.head_dim
        self.scale = attention.scaling
        self.dtype = next(model.parameters()).dtype
        self.rope = checked_rope_spec(attention.rotary_emb)
        """None when keys cannot be re-rotated exactly: every token is then recomputed."""

    def attention_layer(self, layer: int) -> nn.Module:
        return self.blocks[layer].self_attn.attn

    def embed(self, token_ids: Tensor) -> Tensor:
        return self.model.embed_input_ids(token_ids)

    def qkv(
        self, layer: int, hidden: Tensor, residual: Tensor | None, positions: Tensor
    ) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        block = self.blocks[layer]
        if residual is None:
            residual, hidden = hidden, block.input_layernorm(hidden)
        else:
            hidden, residual = block.input_layernorm(hidden, residual)
        attention = block.self_attn
        qkv, _ = attention.qkv_proj(hidden)
        q, k, v = qkv.split([attention.q_size, attention.kv_size, attention.kv_size], dim=-1)
        q = q.reshape(-1, self.num_heads, self.head_dim)
        k = k.reshape(-1, self.num_kv_heads, self.head_dim)
        if getattr(attention, "qk_norm", False):
            q, k = attention.q_norm(q), attention.k_norm(k)
        q, k = attention.rotary_emb(positions, q.flatten(1), k.flatten(1))
        q = q.view(-1, self.num_heads, self.head_dim)
        k = k.view(-1, self.num_kv_heads, self.head_dim)
        return q, k, v.reshape(-1, self.num_kv_heads, self.head_dim), residual

    def finish(self, layer: int, attention: Tensor, residual: Tensor) -> tuple[Tensor, Tensor]:
        block = self.blocks[layer]
        output, _ = block.self_attn.o_proj(attention.contiguous())
        hidden, residual = block.post_attention_layernorm(output, residual)
        return block.mlp(hidden), residual


def checked_rope_spec(rotary: Any) -> RopeSpec | None:
    """The model's RoPE as a spec, if re-rotating keys with it matches the model's own rotation."""
    try:
        if type(rotary).__name__ != "RotaryEmbedding":
            raise UnsupportedModel(f"position encoding {type(rotary).__name__} is not supported")
        spec = RopeSpec(
            head_dim=rotary.head_size,
            rotary_dim=rotary.rotary_dim,
            base=float(rotary.base),
            is_neox_style=bool(rotary.is_neox_style),
        )
        _check_rotation(rotary, spec)
    except (UnsupportedModel, UnsupportedRope) as exc:
        log.warning("blending off, every prompt token is recomputed: %s", exc)
        return None
    return spec


def _check_rotation(rotary: Any, spec: RopeSpec, delta: int = 137) -> None:
    """Rotating keys by ``delta`` must match the model's own rotary embedding at p + delta.

    Computed from a float32 host copy of the model's cos/sin table: the module's `forward_native`
    would convert its own table in place to this check's dtype and device, and a compiled
    forward, which reads the table as it was when compiled, would then compute garbage."""
    generator = torch.Generator().manual_seed(0)
    keys = torch.randn(64, spec.head_dim, generator=generator)
    positions = torch.arange(64) * 7
    queries = torch.zeros_like(keys)
    table = rotary.cos_sin_cache.detach().to("cpu", torch.float32, copy=True)

    def rotate(at: Tensor) -> Tensor:
        _, rotated = rotary.forward_static(
            at,
            queries.clone(),
            keys.clone(),
            spec.head_dim,
            spec.rotary_dim,
            table,
            spec.is_neox_style,
        )
        assert rotated is not None
        return rotated

    at_p, at_p_delta = rotate(positions), rotate(positions + delta)
    moved = rotate_keys(at_p.view(64, 1, -1).float(), delta, spec).view(64, -1)
    error = float((moved - at_p_delta.float()).norm() / at_p_delta.float().norm())
    if error > ROTATION_TOLERANCE:
        raise UnsupportedModel(f"key re-rotation does not match the model's RoPE (error {error})")
    log.info("key re-rotation matches the model's rotary embedding (relative error %.4f)", error)
