"""A hand-made embedder for neighbour tests: "at N degrees" in a text is the unit vector at angle
N on a circle, so two chunks' similarity is the cosine of the angle between them and which
chunks are nearest can be read off their texts."""

from __future__ import annotations

import math
import re

import numpy as np

from retriever.library.documents import NewDocument


class AngleEmbedder:
    dim = 2

    def embed(self, texts: list[str], batch_size: int = 32) -> np.ndarray:
        return np.array([unit_vector(angle_in(text)) for text in texts], dtype=np.float32)


def angle_in(text: str) -> float:
    found = re.search(r"at (\d+) degrees", text)
    if found is None:
        raise ValueError(f"no angle in {text!r}")
    return float(found.group(1))


def unit_vector(degrees: float) -> list[float]:
    return [math.cos(math.radians(degrees)), math.sin(math.radians(degrees))]


def note(degrees: int) -> NewDocument:
    """A one-chunk document `d<degrees>` embedded at that angle."""
    return NewDocument(f"d{degrees}", f"A note at {degrees} degrees.")
