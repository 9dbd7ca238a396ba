"""Split documents into chunks measured in the served model's tokens.

A chunk's `token_ids` are exactly `tokenizer.encode(chunk.text, add_special_tokens=False)`, so a
prompt assembled from stored ids is identical to one tokenized from the text. Chunks break at
paragraphs (blank lines) first, then at sentences and line breaks, then at whitespace, and only as
a last resort inside a very long run of non-space characters; a Markdown heading starts the chunk
of the text it heads. With an overlap, every chunk after
the first also starts with the end of the text before it (`retriever.ingest.overlap`).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterator
from dataclasses import dataclass

from retriever.ingest.chunks import Chunk, TextTokenizer
from retriever.ingest.headings import headings_moved_forward
from retriever.ingest.overlap import overlapping
from retriever.ingest.packer import Packer

_PARAGRAPH_BREAK = re.compile(r"\n\s*\n")
# Sentence ends: ASCII . ! ? before whitespace; CJK full stop, exclamation and question marks.
_SENTENCE_BREAK = re.compile(r"(?<=[.!?])\s+|(?<=[\u3002\uff01\uff1f])\s*|\s*\n\s*")
_WHITESPACE = re.compile(r"\s+")
_SPLIT_LEVELS = (_SENTENCE_BREAK, _WHITESPACE)
_EXTRA_BLANK_LINES = re.compile(r"\n{3,}")
_TRAILING_SPACES = re.compile(r"[ \t]+$", re.MULTILINE)
# Longest stretch of characters a forced split inspects at once; only bounds the work done.
_CHARS_PER_TOKEN_BOUND = 32
_MIN_MAX_TOKENS = 8
_MIN_TOKENS_SHARE = 6
"""A final chunk under 1/6 of the budget joins the previous one when the result still fits."""


@dataclass(frozen=True)
class Chunking:
    """How a document is cut: chunks of at most `max_tokens`, each after the first starting with
    up to `overlap_tokens` of the text that ends the chunk before it."""

    max_tokens: int
    overlap_tokens: int = 0

    @property
    def new_tokens(self) -> int:
        """The budget of the text a chunk adds after its overlap."""
        return self.max_tokens - self.overlap_tokens

    def chunk(self, text: str, tokenizer: TextTokenizer) -> list[Chunk]:
        return chunk_text(
            text,
            tokenizer,
            self.max_tokens,
            self.new_tokens // _MIN_TOKENS_SHARE,
            self.overlap_tokens,
        )


def normalize_text(text: str) -> str:
    """Unify newlines, strip trailing spaces and surrounding blank lines, collapse blank runs."""
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    text = _TRAILING_SPACES.sub("", text)
    return _EXTRA_BLANK_LINES.sub("\n\n", text).strip("\n")


def content_hash(text: str) -> str:
    """SHA-256 hex digest of the normalized text: equal for documents that differ only in layout."""
    return hashlib.sha256(normalize_text(text).encode("utf-8")).hexdigest()


def chunk_text(
    text: str,
    tokenizer: TextTokenizer,
    max_tokens: int = 384,
    min_tokens: int = 64,
    overlap_tokens: int = 0,
) -> list[Chunk]:
    """Split `text` into chunks of at most `max_tokens` tokens, each a contiguous slice of it.

    The text is first cut into pieces of at most `max_tokens - overlap_tokens` tokens, which do
    not overlap: paragraphs that fit are never split and consecutive ones are packed together. A
    paragraph too long for one piece starts a new piece (unless the piece so far has fewer than
    `min_tokens`) and the piece holding its end is closed, so the next paragraph starts fresh. A
    final piece below `min_tokens` joins the previous one when the result still fits. A Markdown
    heading left at the end of a piece moves to the next (`retriever.ingest.headings`). Then each
    piece after the first is extended backwards by up to `overlap_tokens` of the chunk before.
    """
    new_tokens = max_tokens - overlap_tokens
    if overlap_tokens < 0 or new_tokens < _MIN_MAX_TOKENS:
        raise ValueError(
            f"max_tokens - overlap_tokens must be at least {_MIN_MAX_TOKENS} with a "
            f"non-negative overlap, got max_tokens {max_tokens}, overlap_tokens {overlap_tokens}"
        )
    if not 0 <= min_tokens < new_tokens:
        raise ValueError(
            f"min_tokens must be in [0, max_tokens - overlap_tokens), got {min_tokens}"
        )
    pieces = _pieces_without_overlap(text, tokenizer, new_tokens, min_tokens)
    pieces = headings_moved_forward(text, tokenizer, pieces, new_tokens)
    if overlap_tokens == 0:
        return pieces
    return overlapping(text, tokenizer, pieces, max_tokens, overlap_tokens)


def _pieces_without_overlap(
    text: str, tokenizer: TextTokenizer, max_tokens: int, min_tokens: int
) -> list[Chunk]:
    packer = Packer(text, tokenizer, max_tokens)
    for start, end in _spans(text, _PARAGRAPH_BREAK, 0, len(text)):
        if packer.fits(start, end):
            packer.add(start, end)
            continue
        if packer.current_tokens() >= min_tokens:
            packer.close()
        for piece_start, piece_end in _pieces(packer, start, end, 0):
            packer.add(piece_start, piece_end)
        if packer.current_tokens() >= min_tokens:
            packer.close()
    packer.close()
    packer.merge_small_tail(min_tokens)
    return packer.chunks


def _spans(
    text: str, separator: re.Pattern[str], start: int, end: int
) -> Iterator[tuple[int, int]]:
    """Non-blank pieces of `text[start:end]` between matches of `separator`, trimmed."""
    cursor = start
    for match in separator.finditer(text, start, end):
        yield from _trimmed(text, cursor, match.start())
        cursor = match.end()
    yield from _trimmed(text, cursor, end)


def _trimmed(text: str, start: int, end: int) -> Iterator[tuple[int, int]]:
    piece = text[start:end]
    stripped = piece.strip()
    if stripped:
        offset = start + len(piece) - len(piece.lstrip())
        yield offset, offset + len(stripped)


def _pieces(packer: Packer, start: int, end: int, level: int) -> Iterator[tuple[int, int]]:
    """Spans covering `text[start:end]` that each fit, split at the coarsest boundary possible."""
    if level == len(_SPLIT_LEVELS):
        yield from _forced_pieces(packer, start, end)
        return
    for piece_start, piece_end in _spans(packer.text, _SPLIT_LEVELS[level], start, end):
        if packer.fits(piece_start, piece_end):
            yield piece_start, piece_end
        else:
            yield from _pieces(packer, piece_start, piece_end, level + 1)


def _forced_pieces(packer: Packer, start: int, end: int) -> Iterator[tuple[int, int]]:
    """Cut a run without whitespace at the longest prefix that fits (binary search on chars)."""
    while start < end:
        low, high = start + 1, min(end, start + packer.max_tokens * _CHARS_PER_TOKEN_BOUND)
        if not packer.fits(start, low):
            raise ValueError(f"a single character at {start} exceeds max_tokens")
        while low < high:
            middle = (low + high + 1) // 2
            if packer.fits(start, middle):
                low = middle
            else:
                high = middle - 1
        yield start, low
        start = low
