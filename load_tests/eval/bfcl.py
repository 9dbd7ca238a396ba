"""The Berkeley Function Calling Leaderboard's non-live questions, as OpenAI chat requests, and
whether an answer's calls are exactly right by its possible answers.

The data ship in the PyPI package ``bfcl-eval`` (``bfcl_eval/data/``: one JSON object a line;
the possible answers under ``possible_answer/``). Its functions use Python-ish schema types
(``dict``, ``float``, ``tuple``, ``any``) and dotted names; they become JSON Schema and
OpenAI-legal names (dots to underscores, as BFCL's own OpenAI handler does), and calls are
compared under the same names.

A call is right, as BFCL's AST checker has it, when it names an expected function, gives no
parameter the answer does not know, leaves out only parameters whose possible values include
``""``, and gives each parameter one of its possible values (strings compared without case,
spaces or punctuation, an integer accepted for a float, lists and dicts element by element).
``parallel`` answers are right when the calls match the expected ones one to one, in any order;
``irrelevance`` answers are right when they call nothing.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources
from typing import Any

CATEGORIES = ("simple_python", "multiple", "parallel", "parallel_multiple", "irrelevance")
_TYPES = {"dict": "object", "float": "number", "tuple": "array"}


@dataclass(frozen=True)
class Question:
    id: str
    category: str
    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]]
    expected: list[dict[str, dict[str, list[Any]]]]
    """Each expected call: {function name: {parameter: possible values}}; none for
    ``irrelevance``."""


def load(category: str, limit: int | None = None) -> list[Question]:
    """The category's questions in file order with their possible answers; every ``stride``-th
    one when ``limit`` asks for fewer, so the sample spans the whole file."""
    data = resources.files("bfcl_eval") / "data"
    questions = _lines(data / f"BFCL_v4_{category}.json")
    answers = {}
    if category != "irrelevance":
        answers = {
            a["id"]: a["ground_truth"]
            for a in _lines(data / "possible_answer" / f"BFCL_v4_{category}.json")
        }
    if limit is not None and limit < len(questions):
        stride = len(questions) / limit
        questions = [questions[int(n * stride)] for n in range(limit)]
    return [
        Question(
            q["id"],
            category,
            q["question"][0],
            [openai_tool(function) for function in q["function"]],
            [_renamed(call) for call in answers.get(q["id"], [])],
        )
        for q in questions
    ]


def _lines(path: Any) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]


def openai_name(name: str) -> str:
    return name.replace(".", "_")


def _renamed(call: dict[str, Any]) -> dict[str, Any]:
    return {openai_name(name): arguments for name, arguments in call.items()}


def openai_tool(function: dict[str, Any]) -> dict[str, Any]:
    """A BFCL function as an OpenAI function tool with a JSON Schema."""
    described = {**function, "name": openai_name(function["name"])}
    described["parameters"] = json_schema(function.get("parameters", {"type": "dict"}))
    return {"type": "function", "function": described}


def json_schema(schema: Any) -> Any:
    """BFCL's schema types as JSON Schema's, recursively (``any`` loses its type)."""
    if isinstance(schema, list):
        return [json_schema(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    converted = {key: json_schema(value) for key, value in schema.items()}
    kind = schema.get("type")
    if kind == "any":
        del converted["type"]
    elif isinstance(kind, str):
        converted["type"] = _TYPES.get(kind, kind)
    if converted.get("type") == "object" and "properties" in schema:
        converted["properties"] = {k: json_schema(v) for k, v in schema["properties"].items()}
    return converted


def calls_of(tool_calls: Sequence[dict[str, Any]] | None) -> list[tuple[str, Any]]:
    """An OpenAI message's ``tool_calls`` as (name, arguments); unparsable arguments stay text."""
    calls = []
    for call in tool_calls or []:
        function = call["function"]
        try:
            arguments = json.loads(function["arguments"])
        except (json.JSONDecodeError, TypeError):
            arguments = function["arguments"]
        calls.append((function["name"], arguments))
    return calls


def exactly_right(question: Question, calls: Sequence[tuple[str, Any]]) -> bool:
    if not question.expected:
        return not calls
    if len(calls) != len(question.expected):
        return False
    return _match_all(list(calls), list(question.expected))


def _match_all(calls: list[tuple[str, Any]], expected: list[dict[str, Any]]) -> bool:
    """Whether the calls and the expected calls pair up one to one (backtracking: few calls)."""
    if not calls:
        return True
    first, rest = calls[0], calls[1:]
    return any(
        _call_matches(first, candidate)
        and _match_all(rest, expected[:index] + expected[index + 1 :])
        for index, candidate in enumerate(expected)
    )


def _call_matches(call: tuple[str, Any], expected: dict[str, dict[str, list[Any]]]) -> bool:
    name, arguments = call
    if name not in expected or not isinstance(arguments, dict):
        return False
    possible = expected[name]
    if any(parameter not in possible for parameter in arguments):
        return False
    for parameter, values in possible.items():
        if parameter not in arguments:
            if "" not in values:
                return False
        elif not any(_same(arguments[parameter], value) for value in values):
            return False
    return True


def _same(given: Any, allowed: Any) -> bool:
    if isinstance(allowed, str):
        return isinstance(given, str) and _plain(given) == _plain(allowed)
    if isinstance(allowed, bool) or isinstance(given, bool):
        return given is allowed
    if isinstance(allowed, int | float):
        return isinstance(given, int | float) and float(given) == float(allowed)
    if isinstance(allowed, list):
        return (
            isinstance(given, list)
            and len(given) == len(allowed)
            and all(_same(g, a) for g, a in zip(given, allowed, strict=True))
        )
    if isinstance(allowed, dict):
        if not isinstance(given, dict) or set(given) - set(allowed):
            return False
        return all(
            (key not in given and "" in values)
            or (key in given and any(_same(given[key], v) for v in values))
            for key, values in allowed.items()
        )
    return given == allowed


def _plain(text: str) -> str:
    return re.sub(r"[ ,./\-_*^]", "", text).lower().replace("'", '"')
