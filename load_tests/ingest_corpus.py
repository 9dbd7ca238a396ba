"""What the ingest benchmark (`load_tests.bench_ingest`) feeds the library, and where it sees
the time go.

The passages are synthetic: sentences of English words drawn from the embedding model's own
vocabulary (whole words only), grouped into paragraphs, every passage distinct (the library
stores identical content once). The embedding, chunking and storage costs depend on the number
of tokens, not on meaning, so this stands for real prose of the same length.

`StageClock` wraps the library's collaborators (tokenizer, embedder, store, index) with timers,
so a run driving `Library.ingest` directly says how long each stage took; the library itself
carries no timing code.
"""

from __future__ import annotations

import functools
import random
import re
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

_WORD = re.compile(r"[a-z]{3,12}")
VOCABULARY_SIZE = 8000


def vocabulary() -> list[str]:
    """The commonest whole words of all-MiniLM-L6-v2's vocabulary (its file lists them by id)."""
    from retriever.search.embed import default_model_path

    words = (Path(default_model_path()) / "vocab.txt").read_text().split()
    return [word for word in words if _WORD.fullmatch(word)][:VOCABULARY_SIZE]


def passages(count: int, words_each: int, seed: int = 0) -> Iterator[str]:
    """`count` distinct passages of about `words_each` words: sentences of 8-24 words in
    paragraphs of 3-6 sentences."""
    rng = random.Random(seed)
    words = vocabulary()
    for number in range(count):
        paragraphs: list[str] = []
        written = 0
        while written < words_each:
            sentences = []
            for _ in range(rng.randint(3, 6)):
                length = min(rng.randint(8, 24), max(1, words_each - written))
                sentence = " ".join(rng.choices(words, k=length))
                sentences.append(sentence.capitalize() + ".")
                written += length
                if written >= words_each:
                    break
            paragraphs.append(" ".join(sentences))
        paragraphs[0] = f"Passage {number}. {paragraphs[0]}"
        yield "\n\n".join(paragraphs)


class StageClock:
    """Seconds spent in each wrapped call, summed over threads, by stage name."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = defaultdict(float)
        self.calls: dict[str, int] = defaultdict(int)
        self._lock = threading.Lock()

    def wrap(self, owner: Any, method: str, stage: str) -> None:
        """Time every call of `owner.method` (an instance attribute shadows the method)."""
        inner: Callable[..., Any] = getattr(owner, method)

        @functools.wraps(inner)
        def timed(*args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            try:
                return inner(*args, **kwargs)
            finally:
                self._add(stage, time.perf_counter() - started)

        setattr(owner, method, timed)

    def _add(self, stage: str, seconds: float) -> None:
        with self._lock:
            self.seconds[stage] += seconds
            self.calls[stage] += 1

    def report(self) -> dict[str, dict[str, float]]:
        return {
            stage: {"seconds": round(self.seconds[stage], 3), "calls": self.calls[stage]}
            for stage in sorted(self.seconds)
        }


def clock_library(library: Any, clock: StageClock) -> None:
    """Time a `retriever.Library`'s stages: preparing a batch (chunking, of which the served
    model's tokenizer, and embedding), then writing it (the database transaction, the status
    updates, the FAISS add and the index file write)."""
    clock.wrap(library, "_prepare", "prepare: chunking + embedding")
    clock.wrap(library.tokenizer, "encode", "chunking: tokenizer")
    clock.wrap(library.embedder, "embed", "embedding")
    clock.wrap(library.backend, "add", "write: database + faiss")
    store = library.backend.store
    clock.wrap(store, "add_documents", "database transaction")
    clock.wrap(store, "set_statuses", "database status updates")
    clock.wrap(library.index, "add", "faiss add")
    clock.wrap(library.index, "save", "faiss file write")
