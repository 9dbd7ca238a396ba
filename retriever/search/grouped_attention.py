"""Hugging Face attention for the reranker that reads grouped K/V heads where they are.

Transformers' own SDPA attention repeats each K/V head for its query heads whenever there is a
mask, and the reranker always has one (its passages are left-padded to one length): a copy of
every candidate's past K/V, three times over for SmolLM2, in every layer of every call. Torch's
fused CPU kernel reads grouped heads itself with a mask (``enable_gqa``), so this passes them
straight through; on the reranker's calls it computes the same values as transformers' SDPA.
"""

from __future__ import annotations

from typing import Any

import torch.nn.functional as F
from torch import Tensor, nn
from transformers import AttentionInterface, AttentionMaskInterface
from transformers.masking_utils import sdpa_mask

NAME = "ragblend_grouped_sdpa"
"""The implementation's name in transformers' attention registries."""


def grouped_sdpa(
    module: nn.Module,
    query: Tensor,
    key: Tensor,
    value: Tensor,
    attention_mask: Tensor | None,
    dropout: float = 0.0,
    scaling: float | None = None,
    is_causal: bool | None = None,
    **kwargs: Any,
) -> tuple[Tensor, None]:
    """query [batch, heads, q, dim], key and value [batch, kv_heads, k, dim] -> the output as
    [batch, q, heads, dim], as transformers' attention functions return it. Without a mask, a
    block of several queries is causal (transformers leaves the mask out when it is)."""
    if is_causal is None:
        is_causal = getattr(module, "is_causal", True)
    out = F.scaled_dot_product_attention(
        query,
        key,
        value,
        attn_mask=attention_mask,
        dropout_p=dropout,
        scale=scaling,
        is_causal=is_causal and attention_mask is None and query.shape[2] > 1,
        enable_gqa=query.shape[1] != key.shape[1],
    )
    return out.transpose(1, 2).contiguous(), None


def use_grouped_sdpa(model: Any) -> None:
    """Make ``model`` (a transformers causal LM) attend through ``grouped_sdpa``."""
    AttentionInterface.register(NAME, grouped_sdpa)
    AttentionMaskInterface.register(NAME, sdpa_mask)
    model.set_attn_implementation(NAME)
