"""One chunk's KV cache: every layer's keys and values for the chunk's tokens."""

from __future__ import annotations

import io
from dataclasses import dataclass
from typing import BinaryIO

import torch
from torch import Tensor

from engine.kvstore.codec import EntryHeader, EntryReader, stored_format, write_entry
from engine.kvstore.layer_format import LayerFormat
from engine.kvstore.mac import EntryMac


@dataclass(frozen=True, eq=False)
class ChunkKV:
    """Keys and values shaped [num_layers, num_tokens, num_kv_heads, head_dim] on the CPU.

    Keys are stored as computed for the chunk alone (positions from the chunk's own start);
    re-rotating them to a new position is the blender's job. Stores share entries between
    callers without copying, so treat the tensors as read-only.
    """

    keys: Tensor
    values: Tensor
    token_ids: list[int]

    def __post_init__(self) -> None:
        if self.keys.dim() != 4 or self.keys.shape != self.values.shape:
            raise ValueError(
                "keys and values must share one shape [layers, tokens, kv_heads, head_dim], "
                f"got {tuple(self.keys.shape)} and {tuple(self.values.shape)}"
            )
        if self.keys.dtype != self.values.dtype or not self.keys.is_floating_point():
            raise TypeError(f"keys and values must share a float dtype, got {self.keys.dtype}")
        if self.keys.device.type != "cpu" or self.values.device.type != "cpu":
            raise ValueError("ChunkKV tensors must live on the CPU")
        if min(self.keys.shape) == 0:
            raise ValueError(f"ChunkKV dimensions must be non-zero, got {tuple(self.keys.shape)}")
        if len(self.token_ids) != self.num_tokens:
            raise ValueError(f"{len(self.token_ids)} token ids for {self.num_tokens} cached tokens")

    @property
    def num_layers(self) -> int:
        return self.keys.shape[0]

    @property
    def num_tokens(self) -> int:
        return self.keys.shape[1]

    @property
    def num_kv_heads(self) -> int:
        return self.keys.shape[2]

    @property
    def head_dim(self) -> int:
        return self.keys.shape[3]

    @property
    def dtype(self) -> torch.dtype:
        return self.keys.dtype

    @property
    def nbytes(self) -> int:
        """Bytes held by the key and value tensors."""
        return 2 * self.keys.numel() * self.keys.element_size()

    def encoded_nbytes(self, layer_format: LayerFormat = LayerFormat.RAW) -> int:
        """Bytes of the serialized form (`to_bytes`), without serializing: exact for a format of
        fixed size, about the most it takes in `LOSSLESS`, whose size depends on the values."""
        _, tokens, heads, dim = self.keys.shape
        stored = stored_format(layer_format, self.dtype)
        header = EntryHeader(self.dtype, self.num_layers, tokens, heads, dim, [], (), stored)
        return header.total_nbytes

    def layer(self, index: int) -> tuple[Tensor, Tensor]:
        """(k, v) of one layer, each [num_tokens, num_kv_heads, head_dim]."""
        return self.keys[index], self.values[index]

    def write_to(
        self, out: BinaryIO, mac: EntryMac, layer_format: LayerFormat = LayerFormat.RAW
    ) -> int:
        """Serialize into a binary stream, signed with `mac`; returns the bytes written."""
        return write_entry(out, self.token_ids, self.keys, self.values, mac, layer_format)

    def to_bytes(self, mac: EntryMac, layer_format: LayerFormat = LayerFormat.RAW) -> bytes:
        out = io.BytesIO()
        self.write_to(out, mac, layer_format)
        return out.getvalue()

    @classmethod
    def read_from(cls, reader: EntryReader) -> ChunkKV:
        """Read and verify every layer of an opened entry."""
        header = reader.header
        shape = (header.num_layers, header.num_tokens, header.num_kv_heads, header.head_dim)
        keys = torch.empty(shape, dtype=header.dtype)
        values = torch.empty(shape, dtype=header.dtype)
        for index in range(header.num_layers):
            keys[index], values[index] = reader.read_layer(index)
        return cls(keys, values, header.token_ids)

    @classmethod
    def from_bytes(cls, data: bytes, mac: EntryMac) -> ChunkKV:
        """Inverse of `to_bytes`; raises `CorruptEntry` on damaged or foreign bytes."""
        return cls.read_from(EntryReader(io.BytesIO(data), len(data), mac))
