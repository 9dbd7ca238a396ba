"""Find known passages anywhere in a text, with no separator around them.

Stock RAG chains (LangChain's ``create_stuff_documents_chain``, LlamaIndex) paste retrieved
passages into the message text instead of sending ``documents``. To reuse their cached KV the
server must find them again. Each known passage is filed under an anchor: the hash of its first
``WINDOW`` characters. The finder hashes the window that starts at every position of the text, so
a passage is found wherever it starts, whatever surrounds it, and after any number of positions
that match nothing (no stop at the first miss, unlike prefix-chained hashes). A candidate is then
checked against the passage's length and content digest (blake2b-128 of its exact text), so a
hash collision or a passage that merely starts like another never counts.

Pure functions over plain mappings: ``gateway.rag.passage_index`` keeps the mappings.
"""

from __future__ import annotations

import hashlib
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass

WINDOW = 64
"""Characters hashed at each position; passages shorter than this are never found."""


@dataclass(frozen=True, slots=True)
class PassageKey:
    """A passage by content: its length in characters and the digest of its text."""

    length: int
    digest: bytes


@dataclass(frozen=True, slots=True)
class Occurrence:
    """A passage found at ``text[start:end]``."""

    start: int
    end: int
    key: PassageKey


AnchorMap = Mapping[int, Collection[PassageKey]]
"""Anchor (``anchor_of`` a passage) -> the keys of the passages filed under it (a key may be
listed more than once)."""


def passage_key(text: str) -> PassageKey:
    digest = hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).digest()
    return PassageKey(len(text), digest)


def anchor_of(text: str) -> int | None:
    """The anchor a passage is filed under; None when it is too short to be found."""
    if len(text) < WINDOW:
        return None
    return hash(text[:WINDOW])


def occurrences(text: str, anchors: AnchorMap) -> list[Occurrence]:
    """Every place where a passage filed in ``anchors`` stands in ``text``, overlapping ones
    included, by start and then longest first."""
    get = anchors.get
    candidates = [
        (start, keys)
        for start in range(len(text) - WINDOW + 1)
        if (keys := get(hash(text[start : start + WINDOW])))
    ]
    found = {
        Occurrence(start, start + key.length, key)
        for start, keys in candidates
        for key in keys
        if start + key.length <= len(text) and passage_key(text[start : start + key.length]) == key
    }
    return sorted(found, key=lambda hit: (hit.start, -hit.end))


def non_overlapping(found: Iterable[Occurrence]) -> list[Occurrence]:
    """The occurrences that become chunks: scanning from the left, the longest passage starting
    at each position, skipping any that overlaps one already taken."""
    taken: list[Occurrence] = []
    for hit in sorted(found, key=lambda hit: (hit.start, -hit.end)):
        if not taken or hit.start >= taken[-1].end:
            taken.append(hit)
    return taken
