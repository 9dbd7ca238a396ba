"""The served model's KV of reranked passages, kept so a passage is computed once, not per query.

The query-likelihood reranker (`retriever.search.query_likelihood`) reads each candidate passage
through the served model before the question; the passage's keys and values do not depend on
the question, so they are kept here, least recently used first out, within a byte budget, and a
later query computes only its own tokens over them. An entry also keeps the model's next-token
log-probabilities after the passage, which score the question's first token.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor
from transformers.cache_utils import Cache, DynamicLayer


@dataclass(frozen=True)
class PassageKV:
    """One passage prompt's KV, per layer ([kv_heads, tokens, head_dim] each), and the
    log-probabilities of the token after it ([vocab])."""

    keys: tuple[Tensor, ...]
    values: tuple[Tensor, ...]
    next_logprobs: Tensor

    @property
    def tokens(self) -> int:
        return self.keys[0].shape[1]

    @property
    def nbytes(self) -> int:
        tensors = (*self.keys, *self.values, self.next_logprobs)
        return sum(t.numel() * t.element_size() for t in tensors)


class PassageKVCache:
    """Entries by key, least recently used evicted first once they hold over `max_bytes`.
    Not thread-safe: its one user holds a lock around every use."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self._entries: OrderedDict[str, PassageKV] = OrderedDict()
        self._bytes = 0

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, key: str) -> PassageKV | None:
        entry = self._entries.get(key)
        if entry is not None:
            self._entries.move_to_end(key)
        return entry

    def put(self, key: str, entry: PassageKV) -> None:
        old = self._entries.pop(key, None)
        if old is not None:
            self._bytes -= old.nbytes
        self._entries[key] = entry
        self._bytes += entry.nbytes
        while self._bytes > self.max_bytes and self._entries:
            _, evicted = self._entries.popitem(last=False)
            self._bytes -= evicted.nbytes


def left_padded_cache(entries: Sequence[PassageKV], room: int) -> tuple[Cache, Tensor]:
    """`entries` as one batch of past KV, each left-padded with zeros to the longest, with room
    after them for `room` more tokens, and the attention mask over the past positions (0 on
    the padding). Each entry is copied once, into its row."""
    longest = max(entry.tokens for entry in entries)
    layers = []
    for layer in range(len(entries[0].keys)):
        buffers = []
        for kept in (entries[0].keys[layer], entries[0].values[layer]):
            heads, _, dim = kept.shape
            buffers.append(kept.new_empty(len(entries), heads, longest + room, dim))
        for row, entry in enumerate(entries):
            pad = longest - entry.tokens
            for buffer, kept in zip(buffers, (entry.keys[layer], entry.values[layer]), strict=True):
                buffer[row, :, :pad] = 0  # masked out, but a NaN in a masked key poisons a row
                buffer[row, :, pad:longest] = kept
        layers.append(_LayerWithRoom(*buffers, filled=longest))
    mask = torch.zeros(len(entries), longest, dtype=torch.long)
    for row, entry in enumerate(entries):
        mask[row, longest - entry.tokens :] = 1
    return Cache(layers=layers), mask


class _LayerWithRoom(DynamicLayer):
    """A layer's past K/V at the front of buffers with room behind it: ``update`` writes the
    new tokens' K/V in place, where a ``DynamicLayer`` copies the whole past to append them."""

    def __init__(self, keys: Tensor, values: Tensor, filled: int) -> None:
        super().__init__()
        self._buffers, self._filled = (keys, values), filled
        self.dtype, self.device = keys.dtype, keys.device
        self.keys, self.values = keys[:, :, :filled], values[:, :, :filled]
        self.is_initialized = True

    def update(
        self, key_states: Tensor, value_states: Tensor, *args: Any, **kwargs: Any
    ) -> tuple[Tensor, Tensor]:
        end = self._filled + key_states.shape[-2]
        keys, values = self._buffers
        if end > keys.shape[2]:
            raise ValueError(f"{end} tokens in a cache with room for {keys.shape[2]}")
        keys[:, :, self._filled : end] = key_states
        values[:, :, self._filled : end] = value_states
        self._filled = end
        self.keys, self.values = keys[:, :, :end], values[:, :, :end]
        return self.keys, self.values
