"""Stable keys for chunk KV caches.

A chunk's KV depends on the model (weights, dtype, attention geometry) and on the exact token ids,
so the key hashes both. Under tensor parallelism a rank caches only its own KV heads, so its
fingerprint also names the rank and the world size: an entry made by rank 2 of 4 never loads on
another rank or under another split (an unsplit model keeps the fingerprint it always had). Keys
are lowercase hex strings, safe as file names and dict keys, and are
identical across processes, machines and Python versions.
"""

from __future__ import annotations

import hashlib
import json
import re
import struct
from collections.abc import Sequence

import numpy as np

_KEY_HEX_CHARS = 64
_KEY_PATTERN = re.compile(rf"[0-9a-f]{{{_KEY_HEX_CHARS}}}")
_CHUNK_PERSON = b"ragblend.chunk"
_MODEL_PERSON = b"ragblend.model"
_SALTED = b"\xffsalt"
"""Precedes a salt. With the salt's length after it, its first 8 bytes read as a token id exceed
2**40, which no vocabulary reaches: a salted input never equals an unsalted one."""
_DTYPE_ALIASES = {
    "bf16": "bfloat16",
    "fp16": "float16",
    "half": "float16",
    "fp32": "float32",
    "float": "float32",
}


def model_fingerprint(
    model_dir_name: str,
    dtype: str,
    num_layers: int,
    num_kv_heads: int,
    head_dim: int,
    extra: str = "",
    tp_rank: int = 0,
    tp_size: int = 1,
) -> str:
    """Hex fingerprint of everything about a model that changes its KV cache.

    `dtype` accepts "bfloat16", "bf16" or "torch.bfloat16" alike. `extra` carries anything else
    that changes the cache (a weights revision, a quantisation scheme, the fixed chunk prefix).
    `tp_rank` of `tp_size` is the tensor-parallel rank whose share of the KV heads is cached.
    """
    if not 0 <= tp_rank < tp_size:
        raise ValueError(f"tp_rank must be in [0, tp_size), got rank {tp_rank} of {tp_size}")
    for name, value in (
        ("num_layers", num_layers),
        ("num_kv_heads", num_kv_heads),
        ("head_dim", head_dim),
    ):
        if value <= 0:
            raise ValueError(f"{name} must be positive, got {value}")
    if not model_dir_name:
        raise ValueError("model_dir_name must not be empty")
    canonical_dtype = str(dtype).lower().removeprefix("torch.")
    canonical_dtype = _DTYPE_ALIASES.get(canonical_dtype, canonical_dtype)
    fields = [model_dir_name, canonical_dtype, num_layers, num_kv_heads, head_dim, extra]
    if tp_size > 1:
        fields.append(f"tp{tp_rank}/{tp_size}")
    encoded = json.dumps(fields, ensure_ascii=True, separators=(",", ":")).encode()
    return hashlib.blake2b(encoded, digest_size=16, person=_MODEL_PERSON).hexdigest()


def token_ids_bytes(token_ids: Sequence[int]) -> bytes:
    """Canonical encoding of a chunk's token ids: little-endian int64, one per token."""
    ids = np.asarray(token_ids)
    if ids.ndim != 1 or ids.size == 0:
        raise ValueError("token_ids must be a non-empty 1-D sequence")
    if ids.dtype.kind not in "iu":
        raise TypeError(f"token_ids must be integers, got {ids.dtype}")
    if ids.min() < 0 or ids.max() > np.iinfo(np.int64).max:
        raise ValueError("token_ids must be non-negative int64 values")
    return ids.astype("<i8").tobytes()


class ChunkKey(str):
    """Key of one chunk's KV cache: 64 lowercase hex characters (blake2b-256).

    Build one with `ChunkKey.for_chunk(model_fp, token_ids)`; `ChunkKey(text)` only validates an
    existing key (from a file name or a request).
    """

    __slots__ = ()

    def __new__(cls, text: str) -> ChunkKey:
        if not _KEY_PATTERN.fullmatch(text):
            raise ValueError(f"not a chunk key: {text!r}")
        return super().__new__(cls, text)

    @classmethod
    def for_chunk(cls, model_fp: str, token_ids: Sequence[int], salt: str = "") -> ChunkKey:
        """The key of `token_ids` cached by the model with fingerprint `model_fp`.

        A non-empty `salt` (a project's, `gateway.http.projects`) gives the same tokens another
        key, so one project's entries are never another's hits; the empty salt keeps the key
        chunks always had."""
        if not model_fp:
            raise ValueError("model_fp must not be empty")
        digest = hashlib.blake2b(digest_size=_KEY_HEX_CHARS // 2, person=_CHUNK_PERSON)
        fp_bytes = model_fp.encode()
        digest.update(struct.pack("<Q", len(fp_bytes)))
        digest.update(fp_bytes)
        if salt:
            salt_bytes = salt.encode()
            digest.update(_SALTED + struct.pack("<Q", len(salt_bytes)))
            digest.update(salt_bytes)
        digest.update(token_ids_bytes(token_ids))
        return cls(digest.hexdigest())

    @classmethod
    def is_valid(cls, text: str) -> bool:
        """Whether `text` has the form of a chunk key."""
        return _KEY_PATTERN.fullmatch(text) is not None
