"""A gateway app with stand-ins for the engine, the tokenizer and the library's embedder, so
routes that only read them answer without a model."""

from __future__ import annotations

from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

import numpy as np
from fastapi import FastAPI
from fastapi.testclient import TestClient

from gateway.app import create_app
from gateway.settings import Settings

KEY = "test-key"
HEADERS = {"Authorization": f"Bearer {KEY}"}
BOS = 1


class CharTokenizer:
    """One token per character (its code point), a BOS token, and a bracketed chat template."""

    chat_template = "<role>content"

    def encode(self, text: str, add_special_tokens: bool = True) -> list[int]:
        return [BOS] * add_special_tokens + [ord(char) for char in text]

    def decode(self, ids: list[int]) -> str:
        return "".join("<s>" if token == BOS else chr(token) for token in ids)

    def convert_ids_to_tokens(self, ids: list[int]) -> list[str]:
        return ["<s>" if token == BOS else chr(token) for token in ids]

    def apply_chat_template(
        self, conversation: list[dict[str, str]], add_generation_prompt: bool, tokenize: bool
    ) -> str:
        assert not tokenize
        text = "".join(f"<{turn['role']}>{turn['content']}" for turn in conversation)
        return text + "<assistant>" * add_generation_prompt


@dataclass
class FakeEngine:
    max_model_len: int = 2048
    vocab_size: int = 256
    is_alive: bool = True


class WordEmbedder:
    """Vectors of norm 1 from a text's words: texts sharing words point alike."""

    name = "word-embedder"
    dim = 4
    max_tokens = 10

    def token_counts(self, texts: list[str]) -> list[int]:
        return [len(text.split()) + 2 for text in texts]  # [CLS] and [SEP], as BERT's

    def embed(self, texts: list[str], batch_size: int = 32) -> np.ndarray:
        vectors = np.array(
            [[text.count(word) + 0.1 for word in ("cat", "dog", "sky", "sea")] for text in texts],
            dtype=np.float32,
        )
        return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def ready_app(**overrides: Any) -> FastAPI:
    """The app as it serves once loaded: model ``m`` served as ``served``."""
    settings = Settings(model="m", served_model_name="served", **{"api_keys": KEY, **overrides})
    app = create_app(settings)
    state = app.state.ragblend
    state.engine = FakeEngine()
    state.tokenizer = CharTokenizer()
    state.library = SimpleNamespace(embedder=WordEmbedder())
    return app


def client(app: FastAPI) -> TestClient:
    """Requests without the app's lifespan: nothing loads behind the stand-ins."""
    return TestClient(app, headers=HEADERS)
