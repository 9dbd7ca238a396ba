"""The README's "Request fields" table names every request field of OpenAI's chat completions,
completions and Responses APIs (as the ``openai`` package types them), and nothing else except
fields marked as ragblend's or vLLM's extensions."""

from __future__ import annotations

import re
from pathlib import Path

from openai.types import completion_create_params
from openai.types.chat import completion_create_params as chat_params
from openai.types.responses import response_create_params

README = Path(__file__).resolve().parents[2] / "README.md"
TYPES = (
    chat_params.CompletionCreateParamsStreaming,
    completion_create_params.CompletionCreateParamsStreaming,
    response_create_params.ResponseCreateParamsStreaming,
)


def _rows() -> list[tuple[set[str], bool]]:
    """Each table row's field names and whether it is marked as an extension."""
    section = README.read_text().split("### Request fields\n", 1)[1].split("\n### ", 1)[0]
    rows = []
    for line in section.splitlines():
        cells = line.split("|")
        if line.startswith("| `") and len(cells) > 2:
            rows.append((set(re.findall(r"`([a-z_]+)`", cells[1])), "*ext*" in cells[1]))
    return rows


def test_every_openai_request_field_is_in_the_table() -> None:
    documented = set().union(*(names for names, _ in _rows()))
    fields = {name for params in TYPES for name in params.__annotations__}
    assert fields - documented == set()


def test_the_table_names_only_openai_fields_or_marked_extensions() -> None:
    fields = {name for params in TYPES for name in params.__annotations__}
    for names, extension in _rows():
        assert extension or names <= fields, names - fields
        assert not extension or not names & fields, names & fields
