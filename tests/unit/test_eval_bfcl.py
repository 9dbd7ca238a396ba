"""BFCL's questions as the gateway accepts them, and its exactly-right rule: names, every
parameter one of its possible values, optional ones left out, parallel calls in any order,
irrelevance answered without a call."""

from __future__ import annotations

from gateway.openai.tool_types import ToolSpec
from gateway.openai.tools import check_tools
from load_tests.eval.bfcl import CATEGORIES, Question, calls_of, exactly_right, json_schema, load

WEATHER = {"get_weather": {"city": ["New York", "NYC"], "unit": ["celsius", ""]}}
PARALLEL = Question("p", "parallel", [], [], [
    {"spotify_play": {"artist": ["Taylor Swift"], "duration": [20]}},
    {"spotify_play": {"artist": ["Maroon 5"], "duration": [15]}},
])  # fmt: skip


def _one(expected: dict) -> Question:
    return Question("q", "simple_python", [], [], [expected])


def test_a_call_is_right_only_with_possible_values() -> None:
    question = _one(WEATHER)
    assert exactly_right(question, [("get_weather", {"city": "new york"})])
    assert exactly_right(question, [("get_weather", {"city": "NYC", "unit": "Celsius"})])
    assert not exactly_right(question, [("get_weather", {"city": "Boston"})])
    assert not exactly_right(question, [("get_weather", {"unit": "celsius"})])  # city required
    assert not exactly_right(question, [("get_weather", {"city": "NYC", "days": 3})])
    assert not exactly_right(question, [("get_time", {"city": "NYC"})])
    assert not exactly_right(question, [])
    assert not exactly_right(question, [("get_weather", "not json")])


def test_numbers_lists_and_booleans_compare_by_value() -> None:
    question = _one({"f": {"x": [2.0], "items": [[1, 2]], "flag": [True]}})
    assert exactly_right(question, [("f", {"x": 2, "items": [1, 2], "flag": True})])
    assert not exactly_right(question, [("f", {"x": 2, "items": [2, 1], "flag": True})])
    assert not exactly_right(question, [("f", {"x": 2, "items": [1, 2], "flag": 1})])


def test_parallel_calls_match_one_to_one_in_any_order() -> None:
    taylor = ("spotify_play", {"artist": "Taylor Swift", "duration": 20})
    maroon = ("spotify_play", {"artist": "Maroon 5", "duration": 15})
    assert exactly_right(PARALLEL, [maroon, taylor])
    assert not exactly_right(PARALLEL, [taylor, taylor])
    assert not exactly_right(PARALLEL, [taylor])


def test_irrelevance_is_right_without_a_call() -> None:
    question = Question("i", "irrelevance", [], [], [])
    assert exactly_right(question, [])
    assert not exactly_right(question, [("anything", {})])


def test_openai_calls_are_read_with_their_arguments() -> None:
    tool_calls = [{"function": {"name": "f", "arguments": '{"a": 1}'}},
                  {"function": {"name": "g", "arguments": "{oops"}}]  # fmt: skip
    assert calls_of(tool_calls) == [("f", {"a": 1}), ("g", "{oops")]
    assert calls_of(None) == []


def test_schema_types_become_json_schema() -> None:
    schema = {"type": "dict", "properties": {"x": {"type": "float"}, "t": {"type": "tuple",
              "items": {"type": "any"}}}}  # fmt: skip
    assert json_schema(schema) == {"type": "object", "properties": {
        "x": {"type": "number"}, "t": {"type": "array", "items": {}}}}  # fmt: skip


def test_the_shipped_questions_load_and_pass_the_gateways_checks() -> None:
    for category in CATEGORIES:
        questions = load(category, limit=25)
        assert len(questions) == 25 and len({q.id for q in questions}) == 25
        for question in questions:
            tools = [ToolSpec.model_validate(tool) for tool in question.tools]
            check_tools(tools, [f"tools[{n}]" for n in range(len(tools))])
            assert bool(question.expected) == (category != "irrelevance")
