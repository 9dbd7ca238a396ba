"""What chunking produces, and the one tokenizer call it needs (shared by the chunking modules)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


class TextTokenizer(Protocol):
    """The part of a Hugging Face tokenizer that chunking uses."""

    def encode(self, text: str, add_special_tokens: bool = ...) -> list[int]: ...


@dataclass(frozen=True)
class Chunk:
    """`text` is `source[start_char:end_char]`; `token_ids` is the exact encoding of `text`."""

    text: str
    token_ids: list[int]
    start_char: int
    end_char: int


def encode(tokenizer: TextTokenizer, text: str) -> list[int]:
    return tokenizer.encode(text, add_special_tokens=False)
