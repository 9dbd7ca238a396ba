"""The cached chunks of one prompt as a blend reads them: one K and one V tensor per layer.

The store hands a chunk's layers over one at a time, apart from every other chunk's, computed
where the chunk stood when it was stored. A blend needs layer l of all of them as one tensor over
the prompt: each chunk at its rows, its keys re-rotated from where it was computed to where it
stands. This assembles that with one rotation and one scatter per layer for all chunks (their
prompt positions and the rotation are worked out once per prompt), and brings layer l+1 over
while layer l computes (``stream.LayerFeed``).

The question probe reads the first layers before the blend reads them all: a layer asked for
with ``keep`` is held and handed out again, so each chunk's layers are read from the store once,
in order, and nobody replays an iterator.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import pairwise

import torch
from torch import Tensor

from engine.blend.decoder import CachedChunk
from engine.blend.rope import RopeSpec, rotate, rotation
from engine.blend.stream import LayerFeed, LayerKV, upload


class PlacedChunks:
    """Every cached chunk of a prompt of ``num_tokens`` positions, read layer by layer."""

    def __init__(
        self,
        chunks: Sequence[CachedChunk],
        rope: RopeSpec | None,
        num_tokens: int,
        device: torch.device,
    ) -> None:
        """``chunks`` lie inside the prompt, apart from each other, and yield as many layers
        each; ``rope`` moves their keys and may be None only when there are none. On a GPU the
        copy of their first layer starts here."""
        if chunks and rope is None:
            raise ValueError("cached chunks need a RoPE spec to be moved to their new positions")
        self.spans = tuple((chunk.start, chunk.end) for chunk in chunks)
        """(start, end) of every chunk in the prompt, in the order given."""
        if any(not 0 <= start <= end <= num_tokens for start, end in self.spans):
            raise ValueError(f"cached chunks {self.spans} must lie in a {num_tokens}-token prompt")
        if any(end > start for (_, end), (start, _) in pairwise(sorted(self.spans))):
            raise ValueError(f"cached chunks {self.spans} overlap")
        self.num_tokens = num_tokens
        self.device = device
        ids = [torch.arange(chunk.start, chunk.end) for chunk in chunks]
        self.positions = upload(torch.cat(ids) if ids else torch.empty(0, dtype=torch.long), device)
        """The prompt position of every chunk token, chunks in the order given."""
        self._move = None
        if chunks:
            assert rope is not None
            deltas = [
                torch.full((chunk.end - chunk.start,), chunk.start - chunk.source_start)
                for chunk in chunks
            ]
            self._move = rotation(upload(torch.cat(deltas), device), rope, device)
        self._feed = LayerFeed([chunk.layers for chunk in chunks], device)
        self._read = 0
        self._held: dict[int, LayerKV] = {}

    def __len__(self) -> int:
        """How many chunks are cached."""
        return len(self.spans)

    @property
    def num_chunk_tokens(self) -> int:
        return sum(end - start for start, end in self.spans)

    def layer(self, index: int, like: Tensor, keep: bool = False) -> LayerKV:
        """Layer ``index``'s cached (keys, values) over the prompt [num_tokens, *like.shape[1:]]
        in ``like``'s dtype on its device: every chunk at its rows, keys moved there, zeros at
        the other rows. They are the caller's to change.

        The chunks' layers are read once, in order: ``index`` is the next unread layer, or one
        asked for before with ``keep``, which holds it to be handed out once more (a copy is
        returned meanwhile). Raises ``ValueError`` for any other layer."""
        held = self._held.get(index)
        if held is not None:
            if keep:
                return held[0].clone(), held[1].clone()
            return self._held.pop(index)
        if index != self._read:
            raise ValueError(
                f"layer {index} asked for after layer {self._read - 1} was read (held: "
                f"{sorted(self._held)}): cached layers are read once, in order"
            )
        keys, values = self._assembled(like)
        self._read += 1
        if not keep:
            return keys, values
        self._held[index] = keys, values
        return keys.clone(), values.clone()

    def _assembled(self, like: Tensor) -> LayerKV:
        """The next layer of every chunk placed in one tensor each (zeros where none is)."""
        shape = (self.num_tokens, *like.shape[1:])
        keys = torch.zeros(shape, dtype=like.dtype, device=like.device)
        values = torch.zeros_like(keys)
        if not self.spans:
            return keys, values
        assert self._move is not None
        chunk_keys, chunk_values = self._feed.take()
        moved = rotate(chunk_keys.to(like.device), self._move).to(like.dtype)
        keys.index_copy_(0, self.positions, moved)
        values.index_copy_(0, self.positions, chunk_values.to(like.device, like.dtype))
        return keys, values
