"""Embedding calls that wait for the model are answered together, in one pass of the model.

Callers take turns on the embedding model (`retriever.search.embed.Embedder`). Small calls arriving
together (a `/v1/files` upload embeds its two or three chunks, a search its query) would each be
a pass of their own, and a pass over a few texts costs the model far more per text than one over
dozens. So the caller whose turn comes takes, with its own texts, those of the calls waiting
behind it, up to a batch; they find their vectors ready when their turn comes.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np


@dataclass
class EmbeddingCall:
    """One caller's texts, and once a pass has run, its vectors or the pass's error."""

    texts: list[str]
    vectors: np.ndarray | None = None
    error: BaseException | None = None

    @property
    def answered(self) -> bool:
        return self.vectors is not None or self.error is not None


class CallCombiner:
    """The calls waiting for the model; `answer` runs one pass for a call and those behind it."""

    def __init__(self, max_texts: int) -> None:
        self.max_texts = max_texts
        """Texts a pass holds at most, the caller's own (always taken) counted."""
        self._waiting: list[EmbeddingCall] = []
        self._guard = threading.Lock()

    def join(self, texts: list[str]) -> EmbeddingCall:
        call = EmbeddingCall(texts)
        with self._guard:
            self._waiting.append(call)
        return call

    def answer(self, call: EmbeddingCall, encode: Callable[[list[str]], np.ndarray]) -> None:
        """Unless another pass answered `call` already, `encode` its texts with those of the
        calls waiting longest, while they fit in `max_texts`; every call taken is answered."""
        if call.answered:
            return
        calls = self._take(call)
        try:
            vectors = encode([text for taken in calls for text in taken.texts])
        except BaseException as error:
            for taken in calls:
                taken.error = error
            raise
        start = 0
        for taken in calls:
            taken.vectors = vectors[start : start + len(taken.texts)]
            start += len(taken.texts)

    def _take(self, call: EmbeddingCall) -> list[EmbeddingCall]:
        with self._guard:
            self._waiting.remove(call)
            taken, count = [call], len(call.texts)
            for other in list(self._waiting):
                if count + len(other.texts) > self.max_texts:
                    break
                self._waiting.remove(other)
                taken.append(other)
                count += len(other.texts)
        return taken
