"""Chunk KV reaching the model's device without the host waiting for it.

The store hands each chunk's layers over in host memory, one tensor per chunk and layer. Copied
to a GPU the plain way (``.to(device)``, or a ``torch.cat`` of them first, which makes a pageable
host copy) each copy waits for the GPU to finish all it was given, and measured on an H200 the
copies were 39% of a 7B blend's GPU time. Here layer l+1 of every chunk is copied from pinned
memory on a side stream while layer l computes, and the compute stream waits for it by an event:
the host never does. On the CPU a layer is read when it is asked for, as before.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

LayerKV = tuple[Tensor, Tensor]


def upload(host: Tensor, device: torch.device) -> Tensor:
    """``host`` (a CPU tensor the caller no longer changes) on ``device``; to a GPU through
    pinned memory, without the host waiting for the copy."""
    if device.type != "cuda":
        return host.to(device)
    return host.pin_memory().to(device, non_blocking=True)


@dataclass
class _InFlight:
    """One layer of every chunk being copied on the side stream."""

    keys: Tensor
    values: Tensor
    copied: torch.cuda.Event
    sources: list[Tensor]
    """The host tensors the copy reads, alive until it is taken."""


class LayerFeed:
    """Layer after layer of every source (one per chunk), each layer as one (keys, values) pair
    [all chunk tokens, kv_heads, head_dim] in source order on ``device``, in the sources' dtype.

    Every source yields (keys, values) per layer, the same number of layers each. On a GPU the
    next layer is copied ahead on a side stream: the sources are read one layer ahead of what
    was taken (the first at construction).
    """

    def __init__(self, sources: Sequence[Iterator[LayerKV]], device: torch.device) -> None:
        self._sources = list(sources)
        self._device = device
        self._ahead = device.type == "cuda" and bool(self._sources)
        self._side = torch.cuda.Stream(device) if self._ahead else None
        self._next: _InFlight | None = self._copy_next() if self._ahead else None

    def take(self) -> LayerKV:
        """The next layer of every source. On a GPU the current stream is made to wait for its
        copy (the host does not wait), and the copy of the layer after it starts. Raises
        ``StopIteration`` once the sources have no more layers."""
        if not self._ahead:
            keys, values = zip(*[next(source) for source in self._sources], strict=True)
            return _joined(keys, self._device), _joined(values, self._device)
        taken = self._next
        if taken is None:
            raise StopIteration
        compute = torch.cuda.current_stream(self._device)
        compute.wait_event(taken.copied)
        for tensor in (taken.keys, taken.values):
            tensor.record_stream(compute)  # made on the side stream, freed after compute's use
        self._next = self._copy_next()
        return taken.keys, taken.values

    def _copy_next(self) -> _InFlight | None:
        """Start copying the sources' next layer on the side stream; None when they end."""
        try:
            layer = [next(source) for source in self._sources]
        except StopIteration:
            return None
        assert self._side is not None
        compute = torch.cuda.current_stream(self._device)
        host = [_pinned(tensor) for pair in layer for tensor in pair]
        with torch.cuda.stream(self._side):
            if any(tensor.is_cuda for tensor in host):
                self._side.wait_stream(compute)  # device sources are made on the compute stream
            keys = _gathered(host[0::2], self._device)
            values = _gathered(host[1::2], self._device)
            copied = torch.cuda.Event()
            copied.record(self._side)
        return _InFlight(keys, values, copied, host)


def _joined(parts: Sequence[Tensor], device: torch.device) -> Tensor:
    """``parts`` end to end on ``device`` (the CPU path: one ``cat``, then one copy)."""
    return torch.cat(parts).to(device)


def _pinned(tensor: Tensor) -> Tensor:
    """A host tensor in pinned memory (a copy only if it is not pinned already), so a
    non-blocking copy really does not block; a device tensor as it is."""
    if tensor.is_cuda:
        return tensor
    tensor = tensor.contiguous()
    return tensor if tensor.is_pinned() else tensor.pin_memory()


def _gathered(parts: list[Tensor], device: torch.device) -> Tensor:
    """``parts`` end to end in one new tensor on ``device``: one non-blocking copy per part on
    the current (side) stream, no host buffer in between."""
    rows = sum(part.shape[0] for part in parts)
    out = torch.empty((rows, *parts[0].shape[1:]), dtype=parts[0].dtype, device=device)
    offset = 0
    for part in parts:
        out[offset : offset + part.shape[0]].copy_(part, non_blocking=True)
        offset += part.shape[0]
    return out
