"""The library a retrieval-shaped evaluation retrieves from: every distinct passage of the items
in a flat index of their embeddings, each question's top passages and each passage's neighbours.

Split out of ``retrieval_shaped.py``, which asks the prompts these passages make.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from load_tests.eval.prompts import MultiChunkItem


@dataclasses.dataclass
class PassageLibrary:
    """Every distinct document of the items and a flat index of their embeddings."""

    passages: list[str]
    index: Any  # retriever.VectorIndex, ids = positions in ``passages``

    @classmethod
    def of(cls, items: list[Any], embedder: Any) -> PassageLibrary:
        from retriever import VectorIndex

        passages = list(dict.fromkeys(doc for item in items for doc in item.documents))
        vectors = embedder.embed(passages)
        index = VectorIndex(vectors.shape[1])
        index.add(range(len(passages)), vectors)
        return cls(passages, index)

    def retrieve(self, query: np.ndarray, k: int) -> list[int]:
        """The ``k`` passages nearest ``query``, least similar first (the best one last)."""
        return [pid for pid, _ in self.index.search(query, k)][::-1]

    def neighbours(self, pid: int, k: int) -> list[int]:
        """The ``k`` passages nearest passage ``pid`` but itself, most similar last (as the
        library's precompute orders a chunk's neighbour context)."""
        from retriever import context_order, nearest_chunks

        return context_order(nearest_chunks(self.index, pid, k) or [])


def retrieved_items(items: list[Any], library: PassageLibrary, embedder: Any, k: int) -> list[Any]:
    """Each item with its retrieved passages as documents; ``gold_index`` -1 when the gold
    passage was not retrieved."""
    queries = embedder.embed([item.question for item in items])
    shaped = []
    for item, query in zip(items, queries, strict=True):
        documents = [library.passages[pid] for pid in library.retrieve(query, k)]
        gold = item.documents[item.gold_index]
        gold_index = documents.index(gold) if gold in documents else -1
        shaped.append(dataclasses.replace(item, documents=documents, gold_index=gold_index))
    return shaped


def retrieved(item: Any) -> bool:
    """A QA item's documents were retrieved by its question; a summary keeps its own chunks."""
    return isinstance(item, MultiChunkItem)
