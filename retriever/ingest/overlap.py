"""Chunk overlap: each chunk after the first starts with the end of the chunk before it.

Chunking first cuts a document into pieces that do not overlap, each at most `max_tokens -
overlap_tokens` tokens. Every piece after the first is then extended backwards to the earliest
word start (any character in CJK text) in the chunk before it, after that chunk's own start (no
chunk holds the whole of the one before), such that the text they share is at most
`overlap_tokens` tokens and the whole chunk at most `max_tokens` (both counted as the served
model's tokenizer encodes the text on its own). A chunk stays one contiguous slice of the
document whose `token_ids` are the exact encoding of its text, so its KV is precomputed, stored
and found by those tokens like any other chunk's.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Callable, Sequence

from retriever.ingest.chunks import Chunk, TextTokenizer, encode

# Where an overlap may begin: after whitespace, or after any CJK character or punctuation (text
# written without spaces between words).
_OVERLAP_START = re.compile(r"\s+|(?<=[\u3000-\u9fff\uac00-\ud7af\uff00-\uffef])")


def overlapping(
    text: str,
    tokenizer: TextTokenizer,
    pieces: Sequence[Chunk],
    max_tokens: int,
    overlap_tokens: int,
) -> list[Chunk]:
    """`pieces` (in order, not overlapping), each after the first extended backwards into the chunk
    before it by up to `overlap_tokens` tokens, never past `max_tokens` in all."""
    chunks = list(pieces[:1])
    for piece in pieces[1:]:
        start = overlap_start(text, tokenizer, chunks[-1], piece, max_tokens, overlap_tokens)
        chunk_text = text[start : piece.end_char]
        chunks.append(Chunk(chunk_text, encode(tokenizer, chunk_text), start, piece.end_char))
    return chunks


def overlap_start(
    text: str,
    tokenizer: TextTokenizer,
    previous: Chunk,
    piece: Chunk,
    max_tokens: int,
    overlap_tokens: int,
) -> int:
    """The earliest start after `previous`'s start whose text to `previous`'s end is at most
    `overlap_tokens` tokens and from which the chunk through `piece` is at most `max_tokens`;
    `piece`'s own start when not even the last word of `previous` fits."""

    def fits(start: int) -> bool:
        shared = encode(tokenizer, text[start : previous.end_char])
        return len(shared) <= overlap_tokens and (
            len(encode(tokenizer, text[start : piece.end_char])) <= max_tokens
        )

    candidates = _word_starts(text, previous.start_char, previous.end_char)[1:]
    found = _first_fitting(candidates, fits)
    return piece.start_char if found is None else found


def _word_starts(text: str, start: int, end: int) -> list[int]:
    """Positions in `text[start:end]` where a word (in CJK text, any character) begins."""
    starts = {start}
    for match in _OVERLAP_START.finditer(text, start, end):
        if match.end() < end and not text[match.end()].isspace():
            starts.add(match.end())
    return sorted(starts)


def _first_fitting(candidates: list[int], fits: Callable[[int], bool]) -> int | None:
    """The first candidate that fits. Later starts give shorter text, which almost always fits
    when an earlier one does; a binary search finds the boundary, then a walk forward covers a
    tokenizer that merges differently near it."""
    index = bisect.bisect_left(range(len(candidates)), True, key=lambda i: fits(candidates[i]))
    return next((start for start in candidates[index:] if fits(start)), None)
