"""A tiny randomly initialised Hugging Face Llama and a blend adapter over its modules."""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor
from transformers import LlamaConfig, LlamaForCausalLM

from engine.blend.decoder import CachedChunk
from engine.blend.placed import PlacedChunks
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


def placed_in(token_ids: Tensor, chunks: list[CachedChunk]) -> PlacedChunks:
    """``chunks`` placed in the prompt ``token_ids``, their keys moved by the tiny RoPE."""
    return PlacedChunks(chunks, rope_spec(), token_ids.shape[0], token_ids.device)


def reference_kv(model: LlamaForCausalLM, token_ids: Tensor) -> list[tuple[Tensor, Tensor]]:
    """Per-layer (k, v) of a plain full prefill, shaped [tokens, kv_heads, head_dim]."""
    with torch.no_grad():
        cache = model(token_ids[None], use_cache=True).past_key_values
    return [
        (layer.keys[0].transpose(0, 1), layer.values[0].transpose(0, 1)) for layer in cache.layers
    ]


def blend_at(ratio: float, **choices: Any) -> Recipe:
    """A blend recipe recomputing ``ratio`` of the chunk tokens, with no chunk heads unless
    chosen: the maths tests measure the selection alone."""
    return Recipe(recompute_ratio=ratio, **{"chunk_head_tokens": 0, **choices})
