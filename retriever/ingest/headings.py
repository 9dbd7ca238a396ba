"""Markdown headings stay with the text they head.

Packing paragraphs greedily can close a chunk right after a heading, leaving the heading at the
end of one chunk and its section in the next (about one chunk in ten of Markdown READMEs at 384
tokens). Such a heading is moved to the start of the next chunk when that chunk still fits.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from retriever.ingest.chunks import Chunk, TextTokenizer, encode

# A last paragraph that is one ATX heading line (`# Title` to `###### Title`).
_TRAILING_HEADING = re.compile(r"\n\s*\n(#{1,6}[ \t][^\n]*)$")


def headings_moved_forward(
    text: str, tokenizer: TextTokenizer, pieces: Sequence[Chunk], max_tokens: int
) -> list[Chunk]:
    """`pieces` (in order, not overlapping) with every heading that ends one of them, after
    other text, moved to the start of the next piece where that stays within `max_tokens`."""
    moved = list(pieces)
    for index in range(len(moved) - 1):
        piece, following = moved[index], moved[index + 1]
        heading = _TRAILING_HEADING.search(piece.text)
        if heading is None:
            continue
        heading_start = piece.start_char + heading.start(1)
        grown = _chunk(text, tokenizer, heading_start, following.end_char)
        if len(grown.token_ids) > max_tokens:
            continue
        kept_end = piece.start_char + len(piece.text[: heading.start()].rstrip())
        moved[index] = _chunk(text, tokenizer, piece.start_char, kept_end)
        moved[index + 1] = grown
    return moved


def _chunk(text: str, tokenizer: TextTokenizer, start: int, end: int) -> Chunk:
    return Chunk(text[start:end], encode(tokenizer, text[start:end]), start, end)
