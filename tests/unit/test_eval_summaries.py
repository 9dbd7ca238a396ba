"""XSum articles cut into chunks: order and words kept, balanced sizes, filtering, scoring."""

from __future__ import annotations

import pytest

from load_tests.eval.datasets import SummaryItem
from load_tests.eval.summaries import (
    MAX_TOKENS,
    STOP,
    ChunkedSummary,
    build_summary_items,
    score_summary,
    split_article,
    summary_prompt,
)


def _sentence(index: int, words: int = 10) -> str:
    return " ".join(f"w{index}x{k}" for k in range(words - 1)) + f" end{index}."


def _article(paragraphs: int, sentences: int, words: int = 10) -> str:
    """``paragraphs`` lines of ``sentences`` sentences of ``words`` words each."""
    return "\n".join(
        " ".join(_sentence(p * sentences + s, words) for s in range(sentences))
        for p in range(paragraphs)
    )


def test_pieces_keep_every_word_in_order() -> None:
    article = _article(paragraphs=7, sentences=5) + ' He said "Stop!" Then he left.\n'
    pieces = split_article(article, 6)
    assert pieces is not None and len(pieces) == 6
    assert " ".join(pieces).split() == article.split()
    assert all(piece == piece.strip() and piece for piece in pieces)


def test_equal_sentences_give_equal_pieces() -> None:
    pieces = split_article(_article(paragraphs=12, sentences=5), 6)
    assert pieces is not None
    assert [len(piece.split()) for piece in pieces] == [100] * 6


def test_paragraph_breaks_inside_a_piece_survive() -> None:
    pieces = split_article(_article(paragraphs=6, sentences=3), 2)
    assert pieces is not None
    assert pieces[0] == "\n".join(
        " ".join(_sentence(p * 3 + s) for s in range(3)) for p in range(3)
    )


def test_cuts_fall_between_sentences_even_within_a_paragraph() -> None:
    pieces = split_article(_article(paragraphs=1, sentences=6), 3)
    assert pieces is not None
    assert [piece.split()[-1] for piece in pieces] == ["end1.", "end3.", "end5."]


def test_closing_quotes_stay_with_their_sentence() -> None:
    pieces = split_article('She said "We won." They cheered. It rained.', 3)
    assert pieces == ['She said "We won."', "They cheered.", "It rained."]


def test_fewer_sentences_than_pieces_cannot_be_split() -> None:
    assert split_article(_article(paragraphs=1, sentences=5), 6) is None
    with pytest.raises(ValueError):
        split_article("One. Two.", 0)


def test_items_outside_the_size_bounds_are_dropped() -> None:
    items = [
        SummaryItem("fits", _article(paragraphs=6, sentences=2), "ref a"),  # 6 x 20 words
        SummaryItem("short", _article(paragraphs=6, sentences=1), "ref b"),  # 6 x 10 words
        SummaryItem("long", _article(paragraphs=6, sentences=4), "ref c"),  # 6 x 40 words
        SummaryItem("few", _article(paragraphs=1, sentences=5), "ref d"),  # 5 sentences
        SummaryItem("run-on", _sentence(0, 150) + " " + _article(1, 5), "ref e"),  # one giant
    ]
    built = build_summary_items(items, chunks=6, chunk_words=(15, 30))
    assert [item.id for item in built] == ["fits"]
    (fits,) = built
    assert fits.reference == "ref a" and len(fits.documents) == 6
    assert [len(piece.split()) for piece in fits.documents] == [20] * 6


def test_a_custom_counter_sets_the_balance() -> None:
    article = _article(paragraphs=1, sentences=4)
    by_chars = split_article(article, 2, count=len)
    assert by_chars is not None and len(by_chars) == 2
    assert " ".join(by_chars) == article


def test_the_summary_is_scored_with_rouge_l() -> None:
    item = ChunkedSummary("x", ["a", "b"], "The cat sat on the mat.")
    assert score_summary(item, "the cat sat on the mat") == {"rouge_l": 1.0}
    assert score_summary(item, "dogs bark") == {"rouge_l": 0.0}
    assert 0.0 < score_summary(item, "a cat on a mat")["rouge_l"] < 1.0


def test_the_prompt_asks_for_one_sentence_and_stops_at_a_newline() -> None:
    item = ChunkedSummary("x", ["a"], "ref")
    assert summary_prompt(item).endswith("in one sentence.\nSummary:")
    assert STOP == ("\n",) and MAX_TOKENS == 48
