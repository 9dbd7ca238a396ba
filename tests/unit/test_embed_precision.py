"""The embedding model's floating-point type: bfloat16 only where the CPU computes it natively,
and its embeddings rank texts as float32's do."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from retriever.search.embed import Embedder
from retriever.search.embed_precision import cpu_has_native_bf16, resolved_dtype

PASSAGES = [
    "The Eiffel Tower is 330 metres tall and stands in Paris by the river Seine.",
    "Photosynthesis turns sunlight, water and carbon dioxide into glucose and oxygen.",
    "Sourdough rises thanks to wild yeast and lactic acid bacteria in its starter.",
    "The Chrysler Building in New York was finished in 1930.",
]
QUESTIONS = ["How tall is the tower in Paris?", "What do plants make from light?"]


def _cpu_info(tmp_path: Path, flags: str) -> Path:
    path = tmp_path / "cpuinfo"
    path.write_text(f"processor\t: 0\nflags\t\t: fpu sse2 avx2 {flags}\n\nprocessor\t: 1\n")
    return path


def test_native_bf16_is_read_from_the_cpu_flags(tmp_path: Path) -> None:
    assert cpu_has_native_bf16(_cpu_info(tmp_path, "avx512f avx512_bf16"))
    assert cpu_has_native_bf16(_cpu_info(tmp_path, "amx_tile amx_bf16"))
    assert not cpu_has_native_bf16(_cpu_info(tmp_path, "avx512f avx512_vnni"))
    assert not cpu_has_native_bf16(tmp_path / "absent")


def test_an_explicit_type_is_kept_and_auto_is_float32_off_the_cpu() -> None:
    assert resolved_dtype("float32", "cpu") == "float32"
    assert resolved_dtype("bfloat16", "cuda") == "bfloat16"
    assert resolved_dtype("auto", "cuda") == "float32"


@pytest.fixture(scope="module")
def embedders() -> tuple[Embedder, Embedder]:
    return Embedder(dtype="float32"), Embedder(dtype="bfloat16")


def test_bfloat16_embeddings_rank_passages_as_float32_ones_do(embedders) -> None:
    full, half = embedders
    for question in QUESTIONS:
        rankings = [
            np.argsort(-(embedder.embed(PASSAGES) @ embedder.embed([question])[0]))
            for embedder in (full, half)
        ]
        assert rankings[0][0] == rankings[1][0]
    vectors = half.embed(PASSAGES)
    assert vectors.dtype == np.float32
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1, atol=1e-5)
