"""A tiny randomly initialised Hugging Face Llama and a blend adapter over its modules."""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor
from transformers import LlamaConfig, LlamaForCausalLM
from transformers.models.llama.modeling_llama import apply_rotary_pos_emb

from engine.blend.rope import RopeSpec
from engine.contract import Recipe

HEADS, KV_HEADS, HEAD_DIM, LAYERS = 4, 2, 16, 4


def tiny_llama(seed: int = 0) -> LlamaForCausalLM:
    torch.manual_seed(seed)
    config = LlamaConfig(
        vocab_size=128,
        hidden_size=HEADS * HEAD_DIM,
        intermediate_size=128,
        num_hidden_layers=LAYERS,
        num_attention_heads=HEADS,
        num_key_value_heads=KV_HEADS,
        head_dim=HEAD_DIM,
        max_position_embeddings=1024,
        rope_theta=10000.0,
    )
    return LlamaForCausalLM(config).eval().float()


def rope_spec() -> RopeSpec:
    return RopeSpec(head_dim=HEAD_DIM, rotary_dim=HEAD_DIM, base=10000.0, is_neox_style=True)


def reference_kv(model: LlamaForCausalLM, token_ids: Tensor) -> list[tuple[Tensor, Tensor]]:
    """Per-layer (k, v) of a plain full prefill, shaped [tokens, kv_heads, head_dim]."""
    with torch.no_grad():
        cache = model(token_ids[None], use_cache=True).past_key_values
    return [
        (layer.keys[0].transpose(0, 1), layer.values[0].transpose(0, 1)) for layer in cache.layers
    ]


class HFAdapter:
    def __init__(self, model: LlamaForCausalLM) -> None:
        self.model = model.model
        self.num_layers = LAYERS
        self.num_kv_heads = KV_HEADS
        self.head_dim = HEAD_DIM
        self.scale = HEAD_DIM**-0.5

    def embed(self, token_ids: Tensor) -> Tensor:
        return self.model.embed_tokens(token_ids)

    def qkv(
        self, layer: int, hidden: Tensor, residual: Tensor | None, positions: Tensor
    ) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        block = self.model.layers[layer]
        residual = hidden if residual is None else hidden + residual
        x = block.input_layernorm(residual)
        attn = block.self_attn
        q = attn.q_proj(x).view(-1, HEADS, HEAD_DIM)
        k = attn.k_proj(x).view(-1, KV_HEADS, HEAD_DIM)
        v = attn.v_proj(x).view(-1, KV_HEADS, HEAD_DIM)
        cos, sin = self.model.rotary_emb(x[None], positions[None])
        q, k = apply_rotary_pos_emb(q.transpose(0, 1)[None], k.transpose(0, 1)[None], cos, sin)
        return q[0].transpose(0, 1), k[0].transpose(0, 1), v, residual

    def finish(self, layer: int, attention: Tensor, residual: Tensor) -> tuple[Tensor, Tensor]:
        block = self.model.layers[layer]
        residual = residual + block.self_attn.o_proj(attention)
        return block.mlp(block.post_attention_layernorm(residual)), residual


def blend_at(ratio: float, **choices: Any) -> Recipe:
    """A blend recipe recomputing ``ratio`` of the chunk tokens, with no chunk heads unless
    chosen: the maths tests measure the selection alone."""
    return Recipe(recompute_ratio=ratio, **{"chunk_head_tokens": 0, **choices})
