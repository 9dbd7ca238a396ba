"""Multi-chunk QA items (gold passage among distractors) and deterministic tune/held-out splits.

Everything is seeded per item id (``random.Random`` seeded with a string hashes it with SHA-512),
so an item's documents do not depend on the order of the input or on PYTHONHASHSEED.
Distractors come from OTHER items and are rejected when they could answer or contradict the
question: the same passage (Quoref and Disfl-QA share paragraphs across questions), the same
question, or a near-copy of the gold passage (knowledge-conflict paragraphs recur with a
different swapped entity; word-set Jaccard >= ``NEAR_DUPLICATE_JACCARD``), or a passage that
contains one of the item's answers or conflicting answers (normalized, as whole words).
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol, TypeVar

from load_tests.eval.datasets import QAItem
from load_tests.eval.metrics import normalize_answer

NEAR_DUPLICATE_JACCARD = 0.5
_MAX_DRAWS_PER_DISTRACTOR = 50


class HasId(Protocol):
    """Anything with a stable string id."""

    @property
    def id(self) -> str: ...


T = TypeVar("T", bound=HasId)


@dataclass(frozen=True)
class MultiChunkItem:
    """A question over several documents, exactly one of which (``gold_index``) is the gold one."""

    id: str
    question: str
    documents: list[str]
    gold_index: int
    answers: list[str]
    distractor_ids: list[str]
    conflicting_answers: list[str]


def count_words(text: str) -> int:
    """Default length measure: whitespace-separated words."""
    return len(text.split())


def _jaccard(a: frozenset[str], b: frozenset[str]) -> float:
    union = len(a | b)
    return len(a & b) / union if union else 1.0


class _Pool:
    """The usable items in id order with the normalized text the distractor rules compare."""

    def __init__(self, items: Sequence[QAItem]) -> None:
        self.items = sorted(items, key=lambda item: item.id)  # draws index this, not the input
        self.position = {item.id: i for i, item in enumerate(self.items)}
        if len(self.position) != len(self.items):
            raise ValueError("item ids must be unique")
        self.passages = [f" {normalize_answer(it.passage)} " for it in self.items]  # whole words
        self.questions = [normalize_answer(it.question) for it in self.items]
        self.words = [frozenset(p.split()) for p in self.passages]

    def eligible(self, cand: int, gold: int, chosen: list[int], needles: list[str]) -> bool:
        """Whether item ``cand`` may serve as a distractor for item ``gold``."""
        return not (
            self.passages[cand] == self.passages[gold]
            or self.questions[cand] == self.questions[gold]
            or any(self.passages[cand] == self.passages[c] for c in chosen)
            or _jaccard(self.words[cand], self.words[gold]) >= NEAR_DUPLICATE_JACCARD
            or any(needle in self.passages[cand] for needle in needles)
        )

    def draw(self, item: QAItem, count: int, rng: random.Random) -> list[int]:
        """``count`` eligible distractor positions drawn at random (rejection sampling)."""
        gold = self.position[item.id]
        answers = (*item.answers, *item.conflicting_answers)
        needles = [f" {n} " for n in map(normalize_answer, answers) if n]
        chosen: list[int] = []
        for _ in range(count * _MAX_DRAWS_PER_DISTRACTOR):
            if len(chosen) == count:
                break
            cand = rng.randrange(len(self.items))
            if self.eligible(cand, gold, chosen, needles):
                chosen.append(cand)
        if len(chosen) < count:
            raise ValueError(f"{item.id}: found only {len(chosen)} eligible distractors")
        return chosen


def build_multichunk_items(
    items: Sequence[QAItem],
    distractors: int = 5,
    seed: int = 0,
    max_passage_tokens: int | None = None,
    count_tokens: Callable[[str], int] = count_words,
) -> list[MultiChunkItem]:
    """Gold passage plus ``distractors`` passages of other items, shuffled; input order kept.

    With ``max_passage_tokens`` (measured by ``count_tokens``), longer passages are never used:
    items whose gold passage is too long are dropped, so the answer is never truncated away.
    """
    usable = [
        item
        for item in items
        if max_passage_tokens is None or count_tokens(item.passage) <= max_passage_tokens
    ]
    pool = _Pool(usable)
    distinct = len(set(pool.passages))
    if distinct <= distractors:
        raise ValueError(f"need more than {distractors} distinct passages, have {distinct}")
    built = []
    for item in usable:
        rng = random.Random(f"multichunk:{seed}:{item.id}")
        gold = pool.position[item.id]
        order = [gold, *pool.draw(item, distractors, rng)]
        rng.shuffle(order)
        built.append(
            MultiChunkItem(
                id=item.id,
                question=item.question,
                documents=[pool.items[i].passage for i in order],
                gold_index=order.index(gold),
                answers=list(item.answers),
                distractor_ids=[pool.items[i].id for i in order if i != gold],
                conflicting_answers=list(item.conflicting_answers),
            )
        )
    return built


def _unit_hash(text: str) -> float:
    """A stable number in [0, 1) from SHA-256."""
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "big") / 2**64


def split(
    items: Sequence[T],
    tune_fraction: float = 0.5,
    seed: int = 0,
    group: Callable[[T], str] | None = None,
) -> tuple[list[T], list[T]]:
    """Split into (tune, held_out) by a hash of each item's id (or of ``group(item)``).

    Membership depends only on the id and the seed, never on order or on the other items.
    Pass ``group=lambda item: item.passage`` to keep items sharing a passage on one side.
    """
    if not 0.0 <= tune_fraction <= 1.0:
        raise ValueError(f"tune_fraction must be in [0, 1], got {tune_fraction}")
    tune: list[T] = []
    held_out: list[T] = []
    for item in items:
        key = group(item) if group is not None else item.id
        side = tune if _unit_hash(f"split:{seed}:{key}") < tune_fraction else held_out
        side.append(item)
    return tune, held_out


def subsample(items: Sequence[T], count: int, seed: int = 0) -> list[T]:
    """``count`` items chosen by id hash (stable as the input grows), returned in input order."""
    ranked = sorted(range(len(items)), key=lambda i: _unit_hash(f"sample:{seed}:{items[i].id}"))
    keep = set(ranked[:count])
    return [item for i, item in enumerate(items) if i in keep]
