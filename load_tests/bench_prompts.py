"""Deterministic retrieval prompts of exact size: a prefix, k chunks of n tokens, a question."""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

from engine.contract import ChunkSpan

WORDS = [
    "the",
    "river",
    "city",
    "council",
    "annual",
    "report",
    "describes",
    "water",
    "supply",
    "schools",
    "roads",
    "budget",
    "members",
    "voted",
    "plan",
    "new",
    "bridge",
    "north",
    "district",
    "library",
    "hospital",
    "growth",
    "population",
    "museum",
    "history",
    "trade",
    "harbour",
    "ships",
    "winter",
    "summer",
    "festival",
    "market",
    "farmers",
    "grain",
    "railway",
    "station",
    "engineers",
    "design",
    "tunnel",
    "mountain",
    "forest",
    "energy",
    "wind",
    "solar",
    "survey",
    "students",
    "teachers",
    "science",
    "mayor",
    "election",
    "court",
    "law",
    "tax",
    "revenue",
    "spending",
    "housing",
]

QUESTION = "\nQuestion: which projects did the council approve, and why?\nAnswer:"


def chunk_token_ids(tokenizer: Any, count: int, tokens: int, seed: int = 0) -> list[list[int]]:
    """``count`` chunks of exactly ``tokens`` tokens of plain pseudo-English."""
    rng = random.Random(seed)
    chunks = []
    for _ in range(count):
        ids: list[int] = []
        while len(ids) < tokens:
            sentence = " ".join(rng.choice(WORDS) for _ in range(rng.randint(8, 16)))
            ids += tokenizer.encode(sentence.capitalize() + ". ", add_special_tokens=False)
        chunks.append(ids[:tokens])
    return chunks


@dataclass(frozen=True)
class BenchPrompt:
    token_ids: list[int]
    spans: tuple[ChunkSpan, ...]


def assemble(prefix: list[int], chunks: list[list[int]], question: list[int]) -> BenchPrompt:
    ids, spans = list(prefix), []
    for chunk in chunks:
        spans.append(ChunkSpan(len(ids), len(ids) + len(chunk)))
        ids += chunk
    return BenchPrompt(ids + question, tuple(spans))


def shuffled_prompts(
    prefix: list[int], chunks: list[list[int]], question: list[int], count: int, seed: int
) -> list[BenchPrompt]:
    rng = random.Random(seed)
    return [assemble(prefix, rng.sample(chunks, len(chunks)), question) for _ in range(count)]
