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

import torch
from torch import Tensor
from transformers import DynamicCache


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


def left_padded_cache(entries: Sequence[PassageKV]) -> tuple[DynamicCache, Tensor]:
    """`entries` as one batch of past KV, each left-padded with zeros to the longest, and the
    attention mask over those past positions (0 on the padding)."""
    longest = max(entry.tokens for entry in entries)
    cache = DynamicCache()
    for layer in range(len(entries[0].keys)):
        keys = [_left_pad(entry.keys[layer], longest) for entry in entries]
        values = [_left_pad(entry.values[layer], longest) for entry in entries]
        cache.update(torch.stack(keys), torch.stack(values), layer)
    mask = torch.zeros(len(entries), longest, dtype=torch.long)
    for row, entry in enumerate(entries):
        mask[row, longest - entry.tokens :] = 1
    return cache, mask


def _left_pad(tensor: Tensor, tokens: int) -> Tensor:
    """[heads, n, dim] padded with zeros before its n tokens to `tokens`."""
    return torch.nn.functional.pad(tensor, (0, 0, tokens - tensor.shape[1], 0))
