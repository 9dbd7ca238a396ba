"""The blend maths' view (``DecoderAdapter``) of a Hugging Face Llama or Qwen2 model.

The served engine blends over vLLM's modules; this runs the same maths over a plain Hugging Face
model, for the maths' tests on tiny models and for timing them off the engine (on a GPU, where
vLLM's CUDA build cannot go).
"""

from __future__ import annotations

from typing import Any

from torch import Tensor
from transformers.models.llama.modeling_llama import apply_rotary_pos_emb

from engine.blend.rope import RopeSpec


class HFAdapter:
    def __init__(self, model: Any) -> None:
        config = model.config
        self.model = model.model
        self.num_layers = config.num_hidden_layers
        self.num_heads = config.num_attention_heads
        self.num_kv_heads = config.num_key_value_heads
        self.head_dim = getattr(config, "head_dim", None) or config.hidden_size // self.num_heads
        self.scale = self.head_dim**-0.5
        self._rotary: tuple[Tensor, tuple[Tensor, Tensor]] | None = None

    def embed(self, token_ids: Tensor) -> Tensor:
        return self.model.embed_tokens(token_ids)

    def qkv(
        self, layer: int, hidden: Tensor, residual: Tensor | None, positions: Tensor
    ) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        block = self.model.layers[layer]
        residual = hidden if residual is None else hidden + residual
        x = block.input_layernorm(residual)
        attn = block.self_attn
        q = attn.q_proj(x).view(-1, self.num_heads, self.head_dim)
        k = attn.k_proj(x).view(-1, self.num_kv_heads, self.head_dim)
        v = attn.v_proj(x).view(-1, self.num_kv_heads, self.head_dim)
        cos, sin = self._cos_sin(x, positions)
        q, k = apply_rotary_pos_emb(q.transpose(0, 1)[None], k.transpose(0, 1)[None], cos, sin)
        return q[0].transpose(0, 1), k[0].transpose(0, 1), v, residual

    def _cos_sin(self, x: Tensor, positions: Tensor) -> tuple[Tensor, Tensor]:
        """The rotary cos/sin of ``positions``, computed again only when they change (a blend
        passes one positions tensor to layer after layer; Hugging Face's forward computes them
        once, so recomputing them per layer would charge the blend launches the baseline skips)."""
        if self._rotary is None or self._rotary[0] is not positions:
            self._rotary = positions, self.model.rotary_emb(x[None], positions[None])
        return self._rotary[1]

    def finish(self, layer: int, attention: Tensor, residual: Tensor) -> tuple[Tensor, Tensor]:
        block = self.model.layers[layer]
        residual = residual + block.self_attn.o_proj(attention)
        return block.mlp(block.post_attention_layernorm(residual)), residual


def hf_rope_spec(model: Any) -> RopeSpec:
    """The plain (unscaled) RoPE of a Hugging Face Llama or Qwen2 model."""
    adapter = HFAdapter(model)
    config = model.config
    parameters = getattr(config, "rope_parameters", None) or {}
    base = parameters.get("rope_theta", getattr(config, "rope_theta", None))
    return RopeSpec(adapter.head_dim, adapter.head_dim, float(base), is_neox_style=True)
