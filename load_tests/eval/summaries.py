"""XSum summarization over chunked articles: each article cut, in order, into equal pieces.

An article is cut at sentence ends (paragraph breaks included) into ``chunks`` contiguous pieces
of about the same length; each piece is one chunk, precomputed alone. The pieces keep the
article's order: shuffling paragraphs would hurt every mode's summary alike, and what is
measured is reuse of each piece at a new position behind the others. Full prefill sees the same
chunked prompt. Lengths are counted in words (about 1.3 tokens each with the Qwen2.5 and SmolLM2
tokenizers), so the item set does not depend on the model: the default 75-375 words per piece
is roughly 100-500 tokens. Articles too short or too long for that are dropped.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from itertools import accumulate, pairwise

from load_tests.eval.datasets import SummaryItem
from load_tests.eval.metrics import rouge_l
from load_tests.eval.prompts import count_words

SUMMARY_PROMPT = "Summarize the article above in one sentence.\nSummary:"
MAX_TOKENS = 48
STOP = ("\n",)
DEFAULT_CHUNKS = 6
DEFAULT_CHUNK_WORDS = (75, 375)

# Whitespace after ., ! or ?, optionally behind a closing quote or bracket.
_SENTENCE_END = re.compile(r"(?:(?<=[.!?])|(?<=[.!?][\"'\u201d\u2019)]))\s+")


@dataclass(frozen=True)
class ChunkedSummary:
    """An article as consecutive chunks, in order, with its reference summary."""

    id: str
    documents: list[str]
    reference: str


@dataclass(frozen=True)
class _Unit:
    text: str
    separator: str  # what joins it to the unit before: a newline between paragraphs, else a space


def _units(article: str) -> list[_Unit]:
    """The article's sentences, each knowing whether it starts a paragraph."""
    units = []
    for paragraph in (p.strip() for p in article.split("\n")):
        for index, sentence in enumerate(s for s in _SENTENCE_END.split(paragraph) if s):
            units.append(_Unit(sentence, "\n" if index == 0 else " "))
    return units


def _cuts(sizes: Sequence[int], pieces: int) -> list[int]:
    """Unit indices starting pieces 2..``pieces``: each the boundary nearest an equal share."""
    ends = list(accumulate(sizes))
    cuts, start = [], 0
    for k in range(1, pieces):
        target = ends[-1] * k / pieces
        # A cut at c puts units[:c] before it; leave at least one unit per remaining piece.
        cut = min(
            range(start + 1, len(sizes) - pieces + k + 1), key=lambda c: abs(ends[c - 1] - target)
        )
        cuts.append(cut)
        start = cut
    return cuts


def split_article(
    article: str, pieces: int, count: Callable[[str], int] = count_words
) -> list[str] | None:
    """``pieces`` consecutive pieces of about equal ``count``; None with fewer sentences."""
    if pieces < 1:
        raise ValueError(f"pieces must be at least 1, got {pieces}")
    units = _units(article)
    if len(units) < pieces:
        return None
    bounds = [0, *_cuts([count(unit.text) for unit in units], pieces), len(units)]
    return [
        "".join(
            (unit.separator if i else "") + unit.text for i, unit in enumerate(units[start:end])
        )
        for start, end in pairwise(bounds)
    ]


def build_summary_items(
    items: Sequence[SummaryItem],
    chunks: int = DEFAULT_CHUNKS,
    chunk_words: tuple[int, int] = DEFAULT_CHUNK_WORDS,
    count: Callable[[str], int] = count_words,
) -> list[ChunkedSummary]:
    """Articles cut into ``chunks`` pieces, each of ``chunk_words`` (min, max); others dropped."""
    low, high = chunk_words
    built = []
    for item in items:
        pieces = split_article(item.document, chunks, count)
        if pieces is not None and all(low <= count(piece) <= high for piece in pieces):
            built.append(ChunkedSummary(item.id, pieces, item.summary))
    return built


def summary_prompt(item: ChunkedSummary) -> str:
    """The prompt text after the article's chunks (the same for every item)."""
    return SUMMARY_PROMPT


def score_summary(item: ChunkedSummary, answer: str) -> dict[str, float]:
    """Rouge-L F of the generated summary against the reference."""
    return {"rouge_l": rouge_l(answer, item.reference)}
