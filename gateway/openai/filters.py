"""Attribute filters of vector store search and ``file_search``, as OpenAI defines them.

A filter is a comparison (``eq``, ``ne``, ``gt``, ``gte``, ``lt``, ``lte``, ``in``, ``nin``) of
one attribute with a value, or an ``and``/``or`` of filters, to any depth. A file without the
attribute matches no comparison but ``ne`` and ``nin``; ordering compares numbers with numbers
and strings with strings, and any other pair does not match.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Any

from openai.types.shared import ComparisonFilter, CompoundFilter
from pydantic import ValidationError

from gateway.http.errors import APIError
from gateway.openai.validation import check_text, invalid

Filter = ComparisonFilter | CompoundFilter
MAX_DEPTH = 8
_ORDERINGS: dict[str, Callable[[Any, Any], bool]] = {
    "gt": operator.gt,
    "gte": operator.ge,
    "lt": operator.lt,
    "lte": operator.le,
}


def parse_filter(raw: Any, param: str = "filters", depth: int = 0) -> Filter:
    """The filter ``raw`` describes, checked all the way down (a 400 naming the bad part)."""
    if depth > MAX_DEPTH:
        raise APIError(400, f"'{param}' nests deeper than {MAX_DEPTH} levels.", param=param)
    if not isinstance(raw, dict):
        raise APIError(400, f"'{param}' must be an object.", param=param)
    compound = raw.get("type") in ("and", "or")
    try:
        parsed = (CompoundFilter if compound else ComparisonFilter).model_validate(raw)
    except ValidationError as exc:
        raise invalid(exc, param) from None
    if isinstance(parsed, ComparisonFilter):
        _check_comparison(parsed, param)
        return parsed
    children = [
        parse_filter(child, f"{param}.filters.{index}", depth + 1)
        for index, child in enumerate(raw["filters"])
    ]
    return CompoundFilter(type=parsed.type, filters=children)


def _check_comparison(comparison: ComparisonFilter, param: str) -> None:
    check_text(comparison.key, f"{param}.key")
    values = comparison.value if isinstance(comparison.value, list) else [comparison.value]
    for value in values:
        if isinstance(value, str):
            check_text(value, f"{param}.value")
    listed = isinstance(comparison.value, list)
    if listed != (comparison.type in ("in", "nin")):
        raise APIError(
            400,
            f"'{param}.value' must be a list for 'in' and 'nin', and only for them.",
            param=f"{param}.value",
        )


def matches(condition: Filter, attributes: dict[str, Any]) -> bool:
    """Whether a file with ``attributes`` passes ``condition``."""
    if isinstance(condition, CompoundFilter):
        results = (matches(child, attributes) for child in condition.filters)  # type: ignore[arg-type]
        return all(results) if condition.type == "and" else any(results)
    present = condition.key in attributes
    actual, wanted = attributes.get(condition.key), condition.value
    if condition.type in ("eq", "ne"):
        equal = present and _same(actual, wanted)
        return equal if condition.type == "eq" else not equal
    if condition.type in ("in", "nin"):
        found = present and any(_same(actual, item) for item in wanted)  # type: ignore[union-attr]
        return found if condition.type == "in" else not found
    if not present or not _comparable(actual, wanted):
        return False
    return _ORDERINGS[condition.type](actual, wanted)


def _same(actual: Any, wanted: Any) -> bool:
    """Equal and of the same kind: ``True`` is not ``1``, ``"1"`` is not ``1``."""
    return isinstance(actual, bool) == isinstance(wanted, bool) and actual == wanted


def _comparable(actual: Any, wanted: Any) -> bool:
    if isinstance(actual, bool) or isinstance(wanted, bool):
        return False
    numbers = (int, float)
    return (isinstance(actual, numbers) and isinstance(wanted, numbers)) or (
        isinstance(actual, str) and isinstance(wanted, str)
    )
