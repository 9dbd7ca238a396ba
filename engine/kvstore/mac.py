"""Keyed checksums of chunk-KV entries, so an entry not written by this server is refused.

An unkeyed checksum only catches accidents: anyone who can write the store's volume can compute it
for bytes of their choosing (fewer tokens, zeroed K/V) and have them served. With a MAC keyed by a
secret that lives outside the entries (see `secret.py`), only a holder of the secret can produce
an entry that verifies. Each entry is also bound to the key it is stored under, so an entry copied
over another key's file does not verify either.
"""

from __future__ import annotations

import hashlib
import hmac
import struct

from engine.contract.settings import MAX_SECRET_BYTES, MIN_SECRET_BYTES

KEY_ID_BYTES = 8
DIGEST_BYTES = 16


def check_secret(secret: bytes) -> None:
    """Raise ValueError unless `secret` can key the MAC."""
    if not MIN_SECRET_BYTES <= len(secret) <= MAX_SECRET_BYTES:
        raise ValueError(
            f"a chunk-KV secret has {MIN_SECRET_BYTES} to {MAX_SECRET_BYTES} bytes, "
            f"got {len(secret)}"
        )


class EntryMac:
    """Keyed blake2b (a MAC) for the header and the layers of the entry stored under one key.

    `key_id` names the secret without revealing it; it is written into every entry, so a reader
    can tell "written with another secret" from "damaged". Cheap to build: one per read or write.
    """

    def __init__(self, secret: bytes, chunk_key: str) -> None:
        check_secret(secret)
        self._secret = secret
        context = chunk_key.encode()
        self._context = struct.pack("<H", len(context)) + context
        self.key_id = hashlib.blake2b(
            b"ragblend chunk-KV key id", key=secret, digest_size=KEY_ID_BYTES
        ).digest()

    def header(self, body: bytes | bytearray) -> bytes:
        """MAC of the header bytes before the MAC, bound to the entry's key."""
        mac = hashlib.blake2b(key=self._secret, digest_size=DIGEST_BYTES, person=b"rbkv.header")
        mac.update(self._context)
        mac.update(body)
        return mac.digest()

    def layer(self) -> hashlib.blake2b:
        """A fresh MAC for one layer's bytes; feed it with `update`, read it with `digest`."""
        return hashlib.blake2b(key=self._secret, digest_size=DIGEST_BYTES, person=b"rbkv.layer")

    @staticmethod
    def same(a: bytes, b: bytes) -> bool:
        """Compare two MACs in constant time."""
        return hmac.compare_digest(a, b)
