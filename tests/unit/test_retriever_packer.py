"""The packer counts instead of encoding every grown chunk, and still makes the chunks exact
counting makes: with a tokenizer whose joins cost far more than it allows for, every chunk it
closes over budget is packed again."""

from __future__ import annotations

import re

import pytest

from retriever.ingest.packer import JOIN_TOKENS, Packer


class CharTokens:
    """One token per character; a whitespace run costs `space_cost` tokens."""

    def __init__(self, space_cost: int) -> None:
        self.space_cost = space_cost
        self.encoded_chars = 0

    def encode(self, text: str, add_special_tokens: bool = False) -> list[int]:
        self.encoded_chars += len(text)
        ids: list[int] = []
        for piece in re.findall(r"\s+|\S", text):
            ids += [0] * self.space_cost if piece.isspace() else [ord(piece)]
        return ids


def exact_greedy(text: str, spans: list[tuple[int, int]], tokenizer, max_tokens: int):
    chunks, current = [], None
    for start, end in spans:
        if current and len(tokenizer.encode(text[current[0] : end])) <= max_tokens:
            current = (current[0], end)
            continue
        if current:
            chunks.append(current)
        current = (start, end)
    return [*chunks, current]


def packed(text: str, spans: list[tuple[int, int]], tokenizer, max_tokens: int) -> Packer:
    packer = Packer(text, tokenizer, max_tokens)
    for start, end in spans:
        assert packer.fits(start, end)
        packer.add(start, end)
    packer.close()
    return packer


SENTENCE = "the delta of a river spreads its silt across wide flat plains year after year"
TEXT = " ".join([SENTENCE] * 6)
SPANS = [(match.start(), match.end()) for match in re.finditer(r"\S+", TEXT)]


@pytest.mark.parametrize("space_cost", [1, JOIN_TOKENS, 9])
@pytest.mark.parametrize("max_tokens", [12, 40, 100])
def test_chunks_are_those_of_exact_counting(space_cost, max_tokens):
    tokenizer = CharTokens(space_cost)
    packer = packed(TEXT, SPANS, tokenizer, max_tokens)
    expected = exact_greedy(TEXT, SPANS, CharTokens(space_cost), max_tokens)
    assert [(chunk.start_char, chunk.end_char) for chunk in packer.chunks] == expected
    for chunk in packer.chunks:
        assert chunk.text == TEXT[chunk.start_char : chunk.end_char]
        assert chunk.token_ids == tokenizer.encode(chunk.text)
        assert len(chunk.token_ids) <= max_tokens


def test_a_chunk_of_many_spans_is_not_encoded_once_per_span():
    tokenizer = CharTokens(1)
    packed(TEXT, SPANS, tokenizer, 400)
    # Each word once to see that it fits, the chunk now and then near the budget and at close;
    # encoding every grown chunk would read the text about len(SPANS) / 2 = 45 times.
    assert tokenizer.encoded_chars < 8 * len(TEXT)
