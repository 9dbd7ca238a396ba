"""What the PostgreSQL library tests share: one throwaway server per module, emptied before each
test, the served model's tokenizer and a small deterministic embedder.

The embedder hashes words into a fixed-size unit vector, so texts sharing words score high; it
stands in for MiniLM, whose quality the SQLite library tests already cover, to keep these tests
about replication and fast on two cores.
"""

from __future__ import annotations

import re
import zlib
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from load_tests.postgres_launcher import PostgresServer, running_postgres

TOKENIZER_DIR = Path(__file__).resolve().parents[2] / "data" / "models" / "smollm2-135m-instruct"
CHUNK_TOKENS = 64
WORD_DIM = 256


class WordEmbedder:
    dim = WORD_DIM

    def embed(self, texts: list[str], batch_size: int = 32) -> np.ndarray:
        vectors = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, text in enumerate(texts):
            for word in re.findall(r"[a-z0-9]+", text.lower()):
                vectors[row, zlib.crc32(word.encode()) % self.dim] += 1.0
            vectors[row, 0] += 1e-3  # no all-zero vector
        return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


@pytest.fixture(scope="module")
def postgres() -> Iterator[PostgresServer]:
    with running_postgres() as server:
        yield server


@pytest.fixture
def database_url(postgres: PostgresServer) -> str:
    """The module's server, running, with an empty database."""
    if postgres.process is None:
        postgres.start()
    with postgres.connect() as connection:
        connection.execute("DROP SCHEMA public CASCADE")
        connection.execute("CREATE SCHEMA public")
    return postgres.url


@pytest.fixture(scope="module")
def tokenizer():
    if not (TOKENIZER_DIR / "tokenizer.json").exists():
        pytest.skip(f"no tokenizer at {TOKENIZER_DIR}")
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(TOKENIZER_DIR)
