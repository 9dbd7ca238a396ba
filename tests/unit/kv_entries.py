"""Small random chunk-KV entries, the test secret and expectations shared by the store tests."""

from __future__ import annotations

import hashlib
import io
import struct

import torch

from engine.kvstore.codec import write_entry
from engine.kvstore.entry import ChunkKV
from engine.kvstore.expect import EntryExpectation
from engine.kvstore.keys import ChunkKey
from engine.kvstore.mac import DIGEST_BYTES, EntryMac

SECRET = bytes(range(32))
OTHER_SECRET = bytes(range(1, 33))


def make_entry(seed: int, layers: int = 3, tokens: int = 4) -> ChunkKV:
    gen = torch.Generator().manual_seed(seed)
    shape = (layers, tokens, 2, 8)
    keys = torch.randn(shape, generator=gen).to(torch.bfloat16)
    values = torch.randn(shape, generator=gen).to(torch.bfloat16)
    return ChunkKV(keys, values, list(range(seed, seed + tokens)))


def key_of(entry: ChunkKV) -> ChunkKey:
    return ChunkKey.for_chunk("test-model", entry.token_ids)


def expect(entry: ChunkKV) -> EntryExpectation:
    """What a caller blending `entry`'s chunk with `entry`'s model would expect."""
    return EntryExpectation(
        entry.token_ids, entry.num_layers, entry.num_kv_heads, entry.head_dim, entry.dtype
    )


def mac_for(entry: ChunkKV, secret: bytes = SECRET) -> EntryMac:
    return EntryMac(secret, key_of(entry))


def same(a: ChunkKV | None, b: ChunkKV) -> bool:
    return (
        a is not None
        and torch.equal(a.keys, b.keys)
        and torch.equal(a.values, b.values)
        and a.token_ids == b.token_ids
    )


class UnkeyedMac:
    """What a forger without the secret can compute: plain hashes in the entry format, with the
    secret's public id copied from a genuine entry."""

    def __init__(self, key_id: bytes) -> None:
        self.key_id = key_id

    def header(self, body: bytes) -> bytes:
        return hashlib.sha256(body).digest()[:DIGEST_BYTES]

    def layer(self) -> hashlib.blake2b:
        return hashlib.blake2b(digest_size=DIGEST_BYTES)


def forged_bytes(entry: ChunkKV) -> bytes:
    """`entry` in the current format with unkeyed checksums recomputed over its bytes."""
    out = io.BytesIO()
    write_entry(out, entry.token_ids, entry.keys, entry.values, UnkeyedMac(mac_for(entry).key_id))
    return out.getvalue()


def old_format_bytes(entry: ChunkKV) -> bytes:
    """`entry` as format version 1 wrote it: no secret id, unkeyed blake2b checksums."""
    layers, tokens, heads, dim = entry.keys.shape
    fixed = struct.pack("<4sHBxIIII", b"RBKV", 1, 3, layers, tokens, heads, dim)  # 3: bf16
    layer_bytes = [
        entry.keys[i].contiguous().view(torch.uint8).numpy().tobytes()
        + entry.values[i].contiguous().view(torch.uint8).numpy().tobytes()
        for i in range(layers)
    ]
    header_bytes = len(fixed) + 8 * tokens + layers * 32 + 16
    rows = b"".join(
        struct.pack("<QQ", header_bytes + i * len(raw), len(raw))
        + hashlib.blake2b(raw, digest_size=16).digest()
        for i, raw in enumerate(layer_bytes)
    )
    body = fixed + struct.pack(f"<{tokens}q", *entry.token_ids) + rows
    return body + hashlib.blake2b(body, digest_size=16).digest() + b"".join(layer_bytes)


def zeroed(entry: ChunkKV) -> ChunkKV:
    return ChunkKV(torch.zeros_like(entry.keys), torch.zeros_like(entry.values), entry.token_ids)
