"""Greedy packing of consecutive text spans into chunks of at most `max_tokens` model tokens.

Asking the tokenizer whether each grown chunk still fits would encode a chunk again for every
span it takes: a chunk packed from twenty sentences is encoded twenty times. The packer counts
instead: a chunk's tokens are about its spans' own (each encoded once, to see that it fits) plus
`JOIN_TOKENS` for each join, and a chunk is encoded exactly only when that count passes the
budget, when a caller asks its size, and once when it closes. Should the closing encode find the
count was short (a join cost more tokens than allowed for), the chunk's spans are packed again,
each step exactly, so the chunks are the ones exact counting would have made.
"""

from __future__ import annotations

from dataclasses import dataclass

from retriever.ingest.chunks import Chunk, TextTokenizer

JOIN_TOKENS = 2
"""Tokens allowed for joining a span to a chunk: a paragraph break is one token; the space
before a sentence usually merges into its first word's token, which may split differently."""


@dataclass
class _Draft:
    """The chunk being packed: `text[start:end]`, made of `spans`."""

    start: int
    end: int
    spans: list[tuple[int, int]]
    counted: int
    """Its tokens: exact when `token_ids` is known, else the spans' tokens plus the joins'."""
    token_ids: list[int] | None = None


class Packer:
    """Greedily grows the current chunk while its token count stays within budget."""

    def __init__(self, text: str, tokenizer: TextTokenizer, max_tokens: int) -> None:
        self.text = text
        self.tokenizer = tokenizer
        self.max_tokens = max_tokens
        self.chunks: list[Chunk] = []
        self._current: _Draft | None = None
        self._fitted: tuple[int, int, int] | None = None
        """The span `fits` last encoded, with its tokens: `add` usually takes that span next."""

    def encode(self, start: int, end: int) -> list[int]:
        return self.tokenizer.encode(self.text[start:end], add_special_tokens=False)

    def fits(self, start: int, end: int) -> bool:
        tokens = len(self.encode(start, end))
        self._fitted = (start, end, tokens)
        return tokens <= self.max_tokens

    def current_tokens(self) -> int:
        if self._current is None:
            return 0
        self._repack_if_miscounted()
        return len(self._exact(self._current))

    def add(self, start: int, end: int, counting: bool = True) -> None:
        """Append the span to the current chunk, or start a new chunk if the union is too big.
        `counting` False checks every union exactly (packing a miscounted chunk again)."""
        current = self._current
        if current is not None:
            counted = current.counted + self._span_tokens(start, end) + JOIN_TOKENS
            spans = [*current.spans, (start, end)]
            if counting and counted <= self.max_tokens:
                self._current = _Draft(current.start, end, spans, counted)
                return
            token_ids = self.encode(current.start, end)
            if len(token_ids) <= self.max_tokens:
                self._current = _Draft(current.start, end, spans, len(token_ids), token_ids)
                return
            if self._repack_if_miscounted():
                self.add(start, end, counting)  # to the chunk exact counting leaves open
                return
            self.close()
        token_ids = self.encode(start, end)
        if len(token_ids) > self.max_tokens:
            raise ValueError(f"span {start}:{end} exceeds max_tokens; split it first")
        self._current = _Draft(start, end, [(start, end)], len(token_ids), token_ids)

    def close(self) -> None:
        if self._current is None:
            return
        self._repack_if_miscounted()
        draft, self._current = self._current, None
        token_ids = self._exact(draft)
        self.chunks.append(
            Chunk(self.text[draft.start : draft.end], token_ids, draft.start, draft.end)
        )

    def merge_small_tail(self, min_tokens: int) -> None:
        if len(self.chunks) < 2 or len(self.chunks[-1].token_ids) >= min_tokens:
            return
        start, end = self.chunks[-2].start_char, self.chunks[-1].end_char
        token_ids = self.encode(start, end)
        if len(token_ids) <= self.max_tokens:
            self.chunks[-2:] = [Chunk(self.text[start:end], token_ids, start, end)]

    def _repack_if_miscounted(self) -> bool:
        """Whether the current chunk was over budget (its joins cost more than counted) and so
        packed again from its spans, each union checked exactly; the last of those chunks is
        left open, as exact counting would have left it."""
        draft = self._current
        if draft is None or len(self._exact(draft)) <= self.max_tokens:
            return False
        self._current = None
        for start, end in draft.spans:
            self.add(start, end, counting=False)
        return True

    def _exact(self, draft: _Draft) -> list[int]:
        if draft.token_ids is None:
            draft.token_ids = self.encode(draft.start, draft.end)
            draft.counted = len(draft.token_ids)
        return draft.token_ids

    def _span_tokens(self, start: int, end: int) -> int:
        if self._fitted is not None and self._fitted[:2] == (start, end):
            return self._fitted[2]
        return len(self.encode(start, end))
