"""Request checks in OpenAI's terms: bodies validated against the ``openai`` package's own
parameter types, and the limits OpenAI documents for metadata and attributes."""

from __future__ import annotations

from functools import cache
from typing import Any

from pydantic import TypeAdapter, ValidationError

from gateway.http.errors import APIError

MAX_PAIRS = 16
MAX_KEY_CHARS = 64
MAX_VALUE_CHARS = 512
_TYPE_NAMES = {"str", "int", "float", "bool", "list", "dict", "none", "function-after"}


@cache
def _adapter(params_type: Any) -> TypeAdapter[Any]:
    return TypeAdapter(params_type)


def parse_params(params_type: Any, body: Any, prefix: str = "") -> Any:
    """``body`` validated as ``params_type`` (an ``openai.types`` TypedDict or model): a 400 naming
    the field otherwise. Unknown fields are ignored, as OpenAI's own server does."""
    try:
        return _adapter(params_type).validate_python(body)
    except ValidationError as exc:
        raise invalid(exc, prefix) from None


def invalid(exc: ValidationError, prefix: str = "") -> APIError:
    """The 400 for a validation error; of a union's alternatives, the one that got furthest."""
    error = max(exc.errors(), key=lambda entry: len(_fields(entry.get("loc", ()))))
    param = ".".join([prefix] * bool(prefix) + _fields(error.get("loc", ()))) or None
    if param is None:
        return APIError(400, f"Invalid request body: {error.get('msg')}")
    return APIError(400, f"Invalid value for '{param}': {error.get('msg')}", param=param)


def _fields(location: tuple[Any, ...]) -> list[str]:
    """Field names and indices of a location, without the names of union alternatives."""
    return [
        str(part)
        for part in location
        if isinstance(part, int)
        or not (part[:1].isupper() or "[" in part or part.lower() in _TYPE_NAMES)
    ]


def check_metadata(metadata: dict[str, Any] | None, param: str = "metadata") -> dict[str, str]:
    """At most 16 pairs, keys up to 64 characters, string values up to 512."""
    metadata = metadata or {}
    _check_pairs(metadata, param)
    for key, value in metadata.items():
        if not isinstance(value, str) or len(value) > MAX_VALUE_CHARS:
            raise APIError(
                400,
                f"'{param}.{key}' must be a string of at most {MAX_VALUE_CHARS} characters.",
                param=f"{param}.{key}",
            )
    return metadata


def check_attributes(
    attributes: dict[str, Any] | None, param: str = "attributes"
) -> dict[str, Any]:
    """At most 16 pairs, keys up to 64 characters; values strings (up to 512), numbers or
    booleans."""
    attributes = attributes or {}
    _check_pairs(attributes, param)
    for key, value in attributes.items():
        if isinstance(value, str) and len(value) > MAX_VALUE_CHARS:
            raise APIError(
                400,
                f"'{param}.{key}' is longer than {MAX_VALUE_CHARS} characters.",
                param=f"{param}.{key}",
            )
    return attributes


def _check_pairs(pairs: dict[str, Any], param: str) -> None:
    if len(pairs) > MAX_PAIRS:
        raise APIError(400, f"'{param}' has {len(pairs)} pairs; at most {MAX_PAIRS}.", param=param)
    for key, value in pairs.items():
        check_text(key, param)
        if isinstance(value, str):
            check_text(value, f"{param}.{key}")
        if len(key) > MAX_KEY_CHARS:
            raise APIError(
                400, f"'{param}' has a key longer than {MAX_KEY_CHARS} characters.", param=param
            )


def check_text(value: str, param: str) -> str:
    """Text a tokenizer can encode: no lone surrogates (JSON's ``\\ud800``)."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise APIError(
            400, f"'{param}' contains a lone surrogate at position {exc.start}.", param=param
        ) from None
    return value
