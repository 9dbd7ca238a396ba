"""The passage library of retrieval-shaped prompts: retrieval order, neighbours, gold recall."""

from __future__ import annotations

import numpy as np

from load_tests.eval.passage_library import PassageLibrary, retrieved_items
from load_tests.eval.prompts import MultiChunkItem
from retriever.search.index import VectorIndex

ANGLES = {"north": 0.0, "north-east": 0.4, "east": 1.5, "south": 3.1, "west": 4.6}


def _unit(angle: float) -> np.ndarray:
    return np.array([np.cos(angle), np.sin(angle)], dtype=np.float32)


class _AngleEmbedder:
    """Embeds each known text as a unit vector at its angle: similarity falls with the gap."""

    def __init__(self, angles: dict[str, float]) -> None:
        self.angles = angles

    def embed(self, texts: list[str]) -> np.ndarray:
        return np.stack([_unit(self.angles[text]) for text in texts])


def _item(item_id: str, question: str, documents: list[str], gold: int) -> MultiChunkItem:
    return MultiChunkItem(item_id, question, documents, gold, ["a"], [], [])


def test_the_library_holds_each_distinct_passage_once() -> None:
    items = [_item("1", "q", ["north", "east"], 0), _item("2", "q", ["east", "west"], 1)]
    library = PassageLibrary.of(items, _AngleEmbedder(ANGLES))
    assert library.passages == ["north", "east", "west"]
    assert isinstance(library.index, VectorIndex) and len(library.index) == 3


def test_retrieval_puts_the_best_passage_last_and_neighbours_leave_the_passage_out() -> None:
    items = [_item("1", "q", ["north", "north-east", "east", "south", "west"], 0)]
    library = PassageLibrary.of(items, _AngleEmbedder(ANGLES))
    names = library.passages
    assert [names[pid] for pid in library.retrieve(_unit(0.1), 3)] == [
        "east",
        "north-east",
        "north",
    ]
    assert [names[pid] for pid in library.neighbours(0, 2)] == ["east", "north-east"]


def test_each_question_gets_its_top_k_and_the_gold_position_or_minus_one() -> None:
    angles = {**ANGLES, "near north?": 0.2, "near south?": 3.0}
    embedder = _AngleEmbedder(angles)
    items = [
        _item("1", "near north?", ["north", "south", "east"], 0),
        _item("2", "near south?", ["west", "north", "east"], 0),
    ]
    library = PassageLibrary.of(items, embedder)
    first, second = retrieved_items(items, library, embedder, 2)
    assert first.documents == ["east", "north"] and first.gold_index == 1
    assert second.documents == ["east", "south"] and second.gold_index == -1
