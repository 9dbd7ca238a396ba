"""Attribute filters as OpenAI defines them: nested and/or, typed comparisons, clear 400s."""

import pytest

from gateway.http.errors import APIError
from gateway.openai.filters import matches, parse_filter

FILE = {"team": "ops", "year": 2021.0, "draft": False, "tag": "b"}


@pytest.mark.parametrize(
    ("condition", "expected"),
    [
        ({"type": "eq", "key": "team", "value": "ops"}, True),
        ({"type": "ne", "key": "team", "value": "ops"}, False),
        ({"type": "ne", "key": "missing", "value": "x"}, True),
        ({"type": "eq", "key": "missing", "value": "x"}, False),
        ({"type": "gte", "key": "year", "value": 2021}, True),
        ({"type": "gt", "key": "year", "value": 2021}, False),
        ({"type": "lt", "key": "team", "value": "z"}, True),
        ({"type": "lt", "key": "team", "value": 5}, False),
        ({"type": "eq", "key": "draft", "value": False}, True),
        ({"type": "eq", "key": "draft", "value": 0}, False),
        ({"type": "in", "key": "tag", "value": ["a", "b"]}, True),
        ({"type": "nin", "key": "tag", "value": ["a", "b"]}, False),
        ({"type": "nin", "key": "missing", "value": ["a"]}, True),
    ],
)
def test_comparisons(condition, expected):
    assert matches(parse_filter(condition), FILE) is expected


def test_and_or_nest_to_any_depth():
    condition = parse_filter(
        {
            "type": "and",
            "filters": [
                {"type": "eq", "key": "team", "value": "ops"},
                {
                    "type": "or",
                    "filters": [
                        {"type": "gte", "key": "year", "value": 2030},
                        {"type": "in", "key": "tag", "value": ["b"]},
                    ],
                },
            ],
        }
    )
    assert matches(condition, FILE)
    assert not matches(condition, {**FILE, "tag": "c"})
    assert not matches(condition, {**FILE, "team": "dev"})


@pytest.mark.parametrize(
    ("raw", "param"),
    [
        ({"type": "eq", "key": "team"}, "filters.value"),
        ({"type": "similar", "key": "team", "value": "x"}, "filters.type"),
        ({"type": "in", "key": "tag", "value": "b"}, "filters.value"),
        ({"type": "eq", "key": "tag", "value": ["b"]}, "filters.value"),
        ({"type": "or", "filters": [{"type": "eq", "key": 3}]}, "filters.filters.0.key"),
        ({"type": "and", "filters": ["x"]}, "filters.filters.0"),
    ],
)
def test_bad_filters_are_400s_naming_the_part(raw, param):
    with pytest.raises(APIError) as refused:
        parse_filter(raw)
    assert (refused.value.status, refused.value.param) == (400, param)


def test_nesting_is_bounded():
    raw = {"type": "eq", "key": "a", "value": 1}
    for _ in range(20):
        raw = {"type": "and", "filters": [raw]}
    with pytest.raises(APIError, match="deeper"):
        parse_filter(raw)
