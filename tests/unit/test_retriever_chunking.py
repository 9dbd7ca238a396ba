"""Chunking by the served model's tokenizer: exact token ids, bounded sizes, natural boundaries."""

from pathlib import Path

import pytest

from retriever.ingest.chunking import Chunk, chunk_text, content_hash, normalize_text

TOKENIZER_DIR = Path(__file__).resolve().parents[2] / "data" / "models" / "smollm2-135m-instruct"


@pytest.fixture(scope="module")
def tokenizer():
    if not (TOKENIZER_DIR / "tokenizer.json").exists():
        pytest.skip(f"no tokenizer at {TOKENIZER_DIR}")
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(TOKENIZER_DIR)


def sentence(number: int) -> str:
    return f"Sentence number {number} talks about topic {number % 7} in some detail."


def paragraph(first: int, sentences: int) -> str:
    return " ".join(sentence(n) for n in range(first, first + sentences))


def assert_well_formed(chunks: list[Chunk], source: str, tokenizer, max_tokens: int) -> None:
    previous_end = 0
    for chunk in chunks:
        assert chunk.token_ids == tokenizer.encode(chunk.text, add_special_tokens=False)
        assert 0 < len(chunk.token_ids) <= max_tokens
        assert source[chunk.start_char : chunk.end_char] == chunk.text
        assert chunk.text == chunk.text.strip()
        assert chunk.start_char >= previous_end
        previous_end = chunk.end_char
    assert "".join(source.split()) == "".join("".join(c.text for c in chunks).split())


def test_blank_text_gives_no_chunks(tokenizer):
    assert chunk_text("", tokenizer) == []
    assert chunk_text(" \n\n\t \n", tokenizer) == []


def test_small_paragraphs_are_packed_into_one_chunk(tokenizer):
    text = "First paragraph.\n\nSecond paragraph.\n\nThird paragraph."
    chunks = chunk_text(text, tokenizer, max_tokens=64, min_tokens=8)
    assert [chunk.text for chunk in chunks] == [text]
    assert_well_formed(chunks, text, tokenizer, 64)


def test_paragraphs_that_fit_are_never_split(tokenizer):
    paragraphs = [paragraph(10 * i, 1 + i % 5) for i in range(30)]
    text = "\n\n".join(paragraphs)
    chunks = chunk_text(text, tokenizer, max_tokens=96, min_tokens=16)
    assert len(chunks) > 5
    assert_well_formed(chunks, text, tokenizer, 96)
    for each in paragraphs:
        assert sum(each in chunk.text for chunk in chunks) == 1


def test_long_paragraph_breaks_at_sentence_ends(tokenizer):
    text = paragraph(0, 40)
    chunks = chunk_text(text, tokenizer, max_tokens=64, min_tokens=8)
    assert len(chunks) > 3
    assert_well_formed(chunks, text, tokenizer, 64)
    assert all(chunk.text.startswith("Sentence number") for chunk in chunks)
    assert all(chunk.text.endswith("detail.") for chunk in chunks)


def test_sentence_longer_than_a_chunk_breaks_at_whitespace(tokenizer):
    text = " ".join(f"word{n}" for n in range(400))
    chunks = chunk_text(text, tokenizer, max_tokens=50, min_tokens=8)
    assert_well_formed(chunks, text, tokenizer, 50)
    assert " ".join(chunk.text for chunk in chunks) == text


def test_run_without_spaces_is_split_by_tokens(tokenizer):
    text = "abc123XYZ" * 500 + "\n\nA short closing paragraph that follows the blob."
    chunks = chunk_text(text, tokenizer, max_tokens=64, min_tokens=8)
    assert_well_formed(chunks, text, tokenizer, 64)
    assert max(len(chunk.token_ids) for chunk in chunks[:-1]) > 50


def test_cjk_text_without_spaces_breaks_after_full_stops(tokenizer):
    text = "日本語の文章はスペースなしで書かれます。" * 60
    chunks = chunk_text(text, tokenizer, max_tokens=64, min_tokens=8)
    assert len(chunks) > 2
    assert_well_formed(chunks, text, tokenizer, 64)
    assert all(chunk.text.endswith("。") for chunk in chunks)


def test_small_heading_stays_with_the_long_paragraph_after_it(tokenizer):
    text = "Introduction\n\n" + paragraph(0, 20)
    chunks = chunk_text(text, tokenizer, max_tokens=64, min_tokens=16)
    assert chunks[0].text.startswith("Introduction\n\nSentence number 0 ")
    assert_well_formed(chunks, text, tokenizer, 64)


def test_small_trailing_paragraph_joins_the_previous_chunk(tokenizer):
    text = paragraph(0, 6) + "\n\nThe end."
    chunks = chunk_text(text, tokenizer, max_tokens=64, min_tokens=16)
    assert_well_formed(chunks, text, tokenizer, 64)
    assert chunks[-1].text.endswith("detail.\n\nThe end.")


def test_rejects_budgets_too_small_to_make_progress(tokenizer):
    with pytest.raises(ValueError, match="max_tokens"):
        chunk_text("hello", tokenizer, max_tokens=2, min_tokens=0)
    with pytest.raises(ValueError, match="min_tokens"):
        chunk_text("hello", tokenizer, max_tokens=64, min_tokens=64)


def test_normalize_text_unifies_layout():
    messy = "\r\n\r\nTitle  \r\nline two\t\r\n\r\n\r\n\r\nNext\rparagraph   \n\n\n"
    assert normalize_text(messy) == "Title\nline two\n\nNext\nparagraph"


def test_content_hash_ignores_layout_but_not_words():
    assert content_hash("a \r\nb\r\n\r\n\r\nc") == content_hash("a\nb\n\nc\n")
    assert content_hash("a\nb") != content_hash("a\nc")
    assert len(content_hash("x")) == 64


def test_a_markdown_heading_stays_with_its_section(tokenizer):
    sections = [f"## Part {n}\n\n" + paragraph(10 * n, 2) for n in range(12)]
    text = "# Guide\n\n" + "\n\n".join(sections)
    chunks = chunk_text(text, tokenizer, max_tokens=96, min_tokens=16)
    assert_well_formed(chunks, text, tokenizer, 96)
    assert len(chunks) > 3
    for n in range(12):
        (holder,) = [chunk for chunk in chunks if f"## Part {n}\n" in chunk.text]
        assert f"## Part {n}\n\nSentence number {10 * n} " in holder.text
