"""Binary format of one chunk KV entry, readable one layer at a time.

Layout, all little-endian (format version 3):

    fixed header   32 bytes "<4sHBBIIII8s": magic b"RBKV", version, dtype code, layer format,
                   num_layers, num_tokens, num_kv_heads, head_dim, id of the secret (`mac.py`)
    token ids      num_tokens x int64
    layer table    num_layers x "<QQ16s": byte offset, byte length, keyed MAC of the layer
    header MAC     keyed MAC of everything above and of the entry's key (16 bytes)
    layer i        at its offset: K and V, each [num_tokens, num_kv_heads, head_dim], in the
                   layer format (`layer_format.py`: raw bytes, losslessly coded, or 8-bit)

Layers follow the header and each other without gaps. Their lengths follow from the geometry,
except in a format whose size depends on the values (`has_fixed_size`), where the table says.
Every layer carries its own MAC, so a reader can hand layer 0 to the model while layer 1 is still
being read. Raw tensor bytes are written as they are (no pickle), which keeps bf16 and fp8 exact.
Version 2 is version 3 with raw layers only (its layer-format byte was padding, always 0) and is
still read. Version 1 had unkeyed checksums; its entries are refused as `UntrustedEntry`.
"""

from __future__ import annotations

import struct
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import BinaryIO

import numpy as np
import torch
from torch import Tensor

from engine.kvstore.keys import token_ids_bytes
from engine.kvstore.layer_format import (
    LayerFormat,
    decode_layer,
    encode_layer,
    has_fixed_size,
    layer_nbytes,
)
from engine.kvstore.mac import DIGEST_BYTES, KEY_ID_BYTES, EntryMac

if sys.byteorder != "little":  # tensor bytes are stored as the host lays them out
    raise ImportError("engine.kvstore needs a little-endian host")

MAGIC = b"RBKV"
FORMAT_VERSION = 3
_READABLE_VERSIONS = (2, FORMAT_VERSION)
_FIXED = struct.Struct(f"<4sHBBIIII{KEY_ID_BYTES}s")
_LAYER_ROW = struct.Struct(f"<QQ{DIGEST_BYTES}s")
_DTYPE_CODES: dict[torch.dtype, int] = {
    torch.float32: 1,
    torch.float16: 2,
    torch.bfloat16: 3,
    torch.float64: 4,
    torch.float8_e4m3fn: 5,
    torch.float8_e5m2: 6,
}
_CODE_DTYPES = {code: dtype for dtype, code in _DTYPE_CODES.items()}


class CorruptEntry(ValueError):
    """An entry that must not be used: bad magic, truncated, MAC mismatch, or wrong for its use."""


class UntrustedEntry(CorruptEntry):
    """A well-formed entry this server cannot vouch for: another format version or secret."""


@dataclass(frozen=True)
class EntryHeader:
    """Everything before the first layer: geometry, token ids and the per-layer table."""

    dtype: torch.dtype
    num_layers: int
    num_tokens: int
    num_kv_heads: int
    head_dim: int
    token_ids: list[int]
    layer_digests: tuple[bytes, ...]
    layer_format: LayerFormat = LayerFormat.RAW
    layer_lengths: tuple[int, ...] = ()
    """Bytes of each encoded layer; () for the geometry's, in a format of fixed size."""

    def __post_init__(self) -> None:
        if not self.layer_lengths:
            geometry = (self.num_tokens, self.num_kv_heads, self.head_dim)
            fixed = layer_nbytes(self.layer_format, self.dtype, *geometry)
            object.__setattr__(self, "layer_lengths", (fixed,) * self.num_layers)

    @property
    def header_nbytes(self) -> int:
        rows = self.num_layers * _LAYER_ROW.size
        return _FIXED.size + 8 * self.num_tokens + rows + DIGEST_BYTES

    @property
    def total_nbytes(self) -> int:
        return self.header_nbytes + sum(self.layer_lengths)

    def layer_offset(self, index: int) -> int:
        return self.header_nbytes + sum(self.layer_lengths[:index])

    def encode(self, mac: EntryMac) -> bytes:
        """Header bytes, ending with their MAC."""
        fixed = _FIXED.pack(
            MAGIC,
            FORMAT_VERSION,
            _DTYPE_CODES[self.dtype],
            self.layer_format,
            self.num_layers,
            self.num_tokens,
            self.num_kv_heads,
            self.head_dim,
            mac.key_id,
        )
        rows = b"".join(
            _LAYER_ROW.pack(self.layer_offset(i), self.layer_lengths[i], digest)
            for i, digest in enumerate(self.layer_digests)
        )
        body = fixed + token_ids_bytes(self.token_ids) + rows
        return body + mac.header(body)


def stored_format(layer_format: LayerFormat, dtype: torch.dtype) -> LayerFormat:
    """The format an entry of `dtype` is written in: 8-bit dtypes stay raw, never requantized."""
    return LayerFormat.RAW if dtype.itemsize <= 1 else layer_format


def write_entry(
    out: BinaryIO,
    token_ids: Sequence[int],
    keys: Tensor,
    values: Tensor,
    mac: EntryMac,
    layer_format: LayerFormat = LayerFormat.RAW,
) -> int:
    """Write one entry to `out`, signed with `mac`; returns the number of bytes written.

    `keys` and `values` are CPU tensors shaped [num_layers, num_tokens, num_kv_heads, head_dim].
    """
    if keys.dtype not in _DTYPE_CODES:
        raise TypeError(f"unsupported KV dtype {keys.dtype}")
    layer_format = stored_format(layer_format, keys.dtype)
    num_layers, num_tokens, num_kv_heads, head_dim = keys.shape
    layers: list[list[np.ndarray]] = []
    digests = []
    for index in range(num_layers):
        buffers = encode_layer(layer_format, keys[index], values[index])
        layer = mac.layer()
        for buffer in buffers:
            layer.update(buffer)
        layers.append(buffers)
        digests.append(layer.digest())
    lengths = tuple(sum(buffer.nbytes for buffer in buffers) for buffers in layers)
    header = EntryHeader(
        keys.dtype,
        num_layers,
        num_tokens,
        num_kv_heads,
        head_dim,
        list(token_ids),
        tuple(digests),
        layer_format,
        lengths,
    )
    out.write(header.encode(mac))
    for buffers in layers:
        for buffer in buffers:
            out.write(buffer)
    return header.total_nbytes


class EntryReader:
    """Reads an entry from a seekable binary stream: the header at once, layers on demand.

    The header is verified on construction (magic, version, secret id, MAC, and that `size`, the
    stream's total length, is exactly what the header promises, so truncation is caught before
    any layer is read). Each layer is verified against its own MAC when it is read. Damage raises
    `CorruptEntry`; another format version or another secret raises `UntrustedEntry`.
    """

    def __init__(self, source: BinaryIO, size: int, mac: EntryMac) -> None:
        self._source = source
        self._mac = mac
        self.header = self._read_header(size)

    def _read_exact(self, nbytes: int, what: str) -> bytearray:
        buffer = bytearray(nbytes)
        got = self._source.readinto(buffer)
        if got != nbytes:
            raise CorruptEntry(f"truncated {what}: {got} of {nbytes} bytes")
        return buffer

    def _read_header(self, size: int) -> EntryHeader:
        if size < _FIXED.size:
            raise CorruptEntry(f"truncated: {size} bytes is shorter than the fixed header")
        self._source.seek(0)
        fixed = bytes(self._read_exact(_FIXED.size, "fixed header"))
        magic, version, code, form, layers, tokens, heads, dim, key_id = _FIXED.unpack(fixed)
        if magic != MAGIC:
            raise CorruptEntry(f"bad magic {magic!r}")
        if version not in _READABLE_VERSIONS:
            raise UntrustedEntry(f"format version {version}, this server reads {FORMAT_VERSION}")
        if code not in _CODE_DTYPES or min(layers, tokens, heads, dim) == 0:
            raise CorruptEntry("invalid dtype code or zero dimension")
        known_forms = list(LayerFormat) if version == FORMAT_VERSION else [LayerFormat.RAW]
        if form not in known_forms:
            raise UntrustedEntry(f"layer format {form}, this server reads {known_forms}")
        layer_format = LayerFormat(form)
        header = EntryHeader(_CODE_DTYPES[code], layers, tokens, heads, dim, [], (), layer_format)
        fixed_size = has_fixed_size(layer_format)
        if size != header.total_nbytes and (fixed_size or size < header.header_nbytes):
            raise CorruptEntry(f"size {size} does not match the header's {header.total_nbytes}")
        if key_id != self._mac.key_id:  # checked once the layout is known to be consistent
            raise UntrustedEntry("written with another secret")
        rest = self._read_exact(header.header_nbytes - _FIXED.size, "header")
        body, digest = fixed + rest[:-DIGEST_BYTES], bytes(rest[-DIGEST_BYTES:])
        if not EntryMac.same(self._mac.header(body), digest):
            raise CorruptEntry("header MAC mismatch: damaged, or not written by this server")
        token_ids = np.frombuffer(rest, dtype="<i8", count=tokens).tolist()
        rows = list(_LAYER_ROW.iter_unpack(rest[8 * tokens : -DIGEST_BYTES]))
        lengths = header.layer_lengths if fixed_size else tuple(row[1] for row in rows)
        digests = tuple(layer_digest for _, _, layer_digest in rows)
        header = EntryHeader(
            header.dtype, layers, tokens, heads, dim, token_ids, digests, layer_format, lengths
        )
        for index, (offset, length, _) in enumerate(rows):
            if offset != header.layer_offset(index) or length != lengths[index] or length == 0:
                raise CorruptEntry(f"layer {index} table row does not match the layout")
        if size != header.total_nbytes:
            raise CorruptEntry(f"size {size} does not match the layers' {header.total_nbytes}")
        return header

    def read_layer(self, index: int) -> tuple[Tensor, Tensor]:
        """Read, verify and decode layer `index` as (k, v), each [tokens, kv_heads, head_dim]."""
        header = self.header
        if not 0 <= index < header.num_layers:
            raise IndexError(f"layer {index} out of range for {header.num_layers} layers")
        self._source.seek(header.layer_offset(index))
        raw = self._read_exact(header.layer_lengths[index], f"layer {index}")
        layer_mac = self._mac.layer()
        layer_mac.update(raw)
        if not EntryMac.same(layer_mac.digest(), header.layer_digests[index]):
            raise CorruptEntry(f"layer {index} MAC mismatch")
        geometry = (header.num_tokens, header.num_kv_heads, header.head_dim)
        try:
            return decode_layer(header.layer_format, raw, header.dtype, *geometry)
        except ValueError as error:  # signed by a holder of the secret, yet undecodable
            raise CorruptEntry(f"layer {index}: {error}") from error
