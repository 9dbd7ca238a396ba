"""Chunk overlap: chunks within the size claimed, sharing with the chunk before them up to the
overlap claimed, measured in the served model's tokens."""

import itertools
from pathlib import Path

import pytest

from retriever.ingest.chunking import Chunking, chunk_text

TOKENIZER_DIR = Path(__file__).resolve().parents[2] / "data" / "models" / "smollm2-135m-instruct"


@pytest.fixture(scope="module")
def tokenizer():
    if not (TOKENIZER_DIR / "tokenizer.json").exists():
        pytest.skip(f"no tokenizer at {TOKENIZER_DIR}")
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(TOKENIZER_DIR)


def english(paragraphs: int) -> str:
    return "\n\n".join(
        " ".join(
            f"Sentence number {n} talks about topic {n % 7} in some detail."
            for n in range(10 * i, 10 * i + 1 + i % 5)
        )
        for i in range(paragraphs)
    )


def shared_tokens(text: str, before, after, tokenizer) -> int:
    """Tokens of the text two consecutive chunks share (0 when they do not meet)."""
    if after.start_char >= before.end_char:
        return 0
    return len(tokenizer.encode(text[after.start_char : before.end_char], add_special_tokens=False))


def assert_overlapping(chunks, text, tokenizer, chunking: Chunking, slack: int) -> None:
    """Every chunk an exact slice within `max_tokens`; each pair shares at most the overlap and
    at least the overlap less `slack` (word boundaries)."""
    assert len(chunks) > 3
    for chunk in chunks:
        assert text[chunk.start_char : chunk.end_char] == chunk.text
        assert chunk.token_ids == tokenizer.encode(chunk.text, add_special_tokens=False)
        assert len(chunk.token_ids) <= chunking.max_tokens
    for before, after in itertools.pairwise(chunks):
        assert before.start_char < after.start_char < before.end_char < after.end_char
        shared = shared_tokens(text, before, after, tokenizer)
        assert chunking.overlap_tokens - slack <= shared <= chunking.overlap_tokens


@pytest.mark.parametrize(("max_tokens", "overlap"), [(100, 50), (160, 20), (400, 100)])
def test_english_chunks_share_their_overlap_to_a_word(tokenizer, max_tokens, overlap):
    text = english(60)
    chunking = Chunking(max_tokens, overlap)
    chunks = chunking.chunk(text, tokenizer)
    # the first chunk may be a short paragraph: later pairs share the whole overlap, to a word
    assert_overlapping(chunks[1:], text, tokenizer, chunking, slack=4)
    assert shared_tokens(text, chunks[0], chunks[1], tokenizer) <= overlap


def test_cjk_chunks_overlap_between_characters(tokenizer):
    text = "日本語の文章はスペースなしで書かれます。" * 60
    chunking = Chunking(100, 50)
    assert_overlapping(chunking.chunk(text, tokenizer)[1:], text, tokenizer, chunking, slack=4)


def test_overlap_covers_the_whole_text_in_order(tokenizer):
    text = english(20)
    chunks = Chunking(120, 40).chunk(text, tokenizer)
    assert chunks[0].start_char == 0 and chunks[-1].end_char == len(text)
    without = chunk_text(text, tokenizer, 80, 80 // 6)
    # the same new text as chunking without overlap at the budget left after the overlap
    assert [c.end_char for c in chunks] == [c.end_char for c in without]


def test_zero_overlap_is_the_plain_chunking(tokenizer):
    text = english(20)
    assert Chunking(384).chunk(text, tokenizer) == chunk_text(text, tokenizer, 384, 64)


def test_an_overlap_leaving_too_little_room_is_refused(tokenizer):
    with pytest.raises(ValueError, match="overlap_tokens"):
        chunk_text("hello", tokenizer, max_tokens=10, min_tokens=0, overlap_tokens=5)
    with pytest.raises(ValueError, match="overlap_tokens"):
        chunk_text("hello", tokenizer, max_tokens=100, min_tokens=0, overlap_tokens=-1)
