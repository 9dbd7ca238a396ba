"""No request field is silently dropped: each one either works, is harmless metadata, or is
refused with a 400 naming it. This module holds the refusals and the unknown-field rule.

Unknown fields get OpenAI's own answer, ``400 Unrecognized request argument supplied: X``
(``gateway.http.errors``); so are fields a route does not serve (``tools`` on completions).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any

from pydantic import AfterValidator, Field
from pydantic_core import PydanticCustomError

from gateway.http.errors import REFUSED_FIELD


def _refusal(allowed: Callable[[Any], bool], reason: str) -> Any:
    def check(value: Any) -> Any:
        if value is not None and not allowed(value):
            raise PydanticCustomError(REFUSED_FIELD, reason)
        return value

    return Annotated[Any, AfterValidator(check), Field(None)]


def _never(_: Any) -> bool:
    return False


def _is_one(value: Any) -> bool:
    return type(value) is int and value == 1


def _text_only(value: Any) -> bool:
    return value == ["text"]


def _no_reasoning(value: Any) -> bool:
    return value == "none"


def _default_verbosity(value: Any) -> bool:
    return value == "medium"


def _not_echoed(value: Any) -> bool:
    return value is False


BestOf = _refusal(_is_one, "best_of > 1 is not supported; send n for several completions.")
Suffix = _refusal(_never, "suffix (insertion after the completion) is not supported.")
Echo = _refusal(_not_echoed, "echo is not supported: the prompt is not returned.")
ReasoningEffort = _refusal(
    _no_reasoning, "reasoning_effort is not supported: the served model does not reason."
)
Audio = _refusal(_never, "audio output is not supported: the model answers in text.")
Modalities = _refusal(_text_only, "modalities other than ['text'] are not supported.")
Prediction = _refusal(_never, "prediction (predicted outputs) is not supported.")
WebSearchOptions = _refusal(_never, "web_search_options is not supported: no web search.")
Functions = _refusal(_never, "functions is deprecated and not supported; use tools.")
FunctionCall = _refusal(_never, "function_call is deprecated and not supported; use tool_choice.")
Moderation = _refusal(_never, "moderation is not supported: nothing is moderated.")
Verbosity = _refusal(
    _default_verbosity, "verbosity other than 'medium' is not supported by the served model."
)


def without_nulls(data: Any) -> Any:
    """An explicit ``null`` means "not given", as OpenAI reads it (LangChain and other clients
    send ``"stop": null`` and the like)."""
    if not isinstance(data, dict):
        return data
    return {key: value for key, value in data.items() if value is not None}
