"""Dataset loaders parse inline samples written in the real BIG-bench 1.0.0 formats."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from load_tests.eval.datasets import (
    DISFL_QA,
    KNOWLEDGE_CONFLICTS,
    QUOREF,
    XSUM,
    load_disfl_qa,
    load_knowledge_conflicts,
    load_quoref,
    load_xsum,
    parse_knowledge_conflict,
    tokenize_like_passage,
)

KC_EXAMPLES = [
    {
        "input": "\nQuestion: who does candace like in phineas and ferb?\nContext: Candace Flynn "
        "( voiced by Ashley Tisdale ) is Phineas 's older sister . Candace also has an obvious "
        "crush on Griselda Blanco , but for a long time she was oblivious .",
        "target": "Griselda Blanco",
        "target_scores": {"Griselda Blanco": 1, "Jeremy Johnson": 0},
    },
    {
        "input": "\nQuestion: who is the voice for beef?\nContext: It featured Robert Mitchum .",
        "target": "Robert Mitchum",
        "target_scores": {"Robert Mitchum": 0},
    },
]
QUOREF_EXAMPLES = [
    {
        "input": "Passage: The swarm was noted by seismologist John Cassidy and volcanologist "
        "Catherine Hickson.\nHickson doubted it would be explosive. \nQuestion: What is the first "
        "name of the person who doubted it would be explosive?",
        "target": ["Catherine."],
    },
    {
        "input": "Passage: Columbus Smith and Nathaniel Jones advocated a federal agency. "
        "\nQuestion: What are the first names of the people who advocated a federal agency?",
        "target": ["Columbus.", "Nathaniel."],
    },
]
DISFL_EXAMPLES = [
    {
        "input": "What part the composition of the Earth ' s biosphere is comprised of oxygen no "
        "sorry the Earth ' s atmosphere ?  \ncontext: Dioxygen is a major part of the Earth ' s "
        "atmosphere . ",
        "target": "major",
    },
    {
        "input": "How many died in 1654 no wait in 1466 ?  \ncontext: In 1466 , perhaps 40 , 000 "
        "people died of the plague in Paris . ",
        "target": "40,000",
    },
    {
        "input": "What does a construction engineer no what does a manager do ?  \ncontext: "
        "Construction engineers design temporary structures . ",
        "target": "unknown",
    },
    {"input": " # VALUE !  \ncontext: Robert Guiscard was a Norman . ", "target": "Robert"},
]
XSUM_EXAMPLES = [
    {
        "input": "Since late November, Scotland's resorts have attracted 373,782 customers.\n"
        "The season brought £37.5m into the local economy.",
        "target": "Skiing in Scotland looks set to continue into June.",
        "comment": "xsum-test-0",
    },
    {"input": "A short article.\n", "target": " A summary. "},
]


def _write_task(root: Path, task: str, examples: list[dict[str, Any]]) -> None:
    path = root / task / "task.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"name": task, "examples": examples}), encoding="utf-8")


def test_knowledge_conflicts_split_question_and_context(tmp_path: Path) -> None:
    _write_task(tmp_path, KNOWLEDGE_CONFLICTS, KC_EXAMPLES)
    first, second = load_knowledge_conflicts(tmp_path)
    assert first.id == "kc-00000"
    assert first.question == "who does candace like in phineas and ferb?"
    assert first.passage.startswith("Candace Flynn ( voiced") and first.passage.endswith(
        "oblivious ."
    )
    assert first.answers == ["Griselda Blanco"]
    assert first.conflicting_answers == ["Jeremy Johnson"]
    assert second.answers == ["Robert Mitchum"] and second.conflicting_answers == []


def test_knowledge_conflict_rejects_other_formats() -> None:
    with pytest.raises(ValueError, match="kc-00007"):
        parse_knowledge_conflict({"input": "Context: x\nQuestion: y?", "target": "x"}, 7)


def test_quoref_strips_periods_and_skips_or_joins_multi_span(tmp_path: Path) -> None:
    _write_task(tmp_path, QUOREF, QUOREF_EXAMPLES)
    (single,) = load_quoref(tmp_path)
    assert single.id == "quoref-00000"
    assert single.answers == ["Catherine"]
    assert "\nHickson doubted" in single.passage and single.passage.endswith("explosive.")
    assert single.question.startswith("What is the first name") and single.question.endswith("?")
    joined = load_quoref(tmp_path, multi_span="join")
    assert [item.id for item in joined] == ["quoref-00000", "quoref-00001"]
    assert joined[1].answers == ["Columbus, Nathaniel", "Columbus and Nathaniel"]


def test_disfl_qa_filters_and_adds_tokenized_answers(tmp_path: Path) -> None:
    _write_task(tmp_path, DISFL_QA, DISFL_EXAMPLES)
    major, died = load_disfl_qa(tmp_path)
    assert major.id == "disfl-00000" and major.answers == ["major"]
    assert major.question.endswith("Earth ' s atmosphere ?")
    assert major.passage == "Dioxygen is a major part of the Earth ' s atmosphere ."
    assert died.answers == ["40,000", "40 , 000"]
    with_unknown = load_disfl_qa(tmp_path, include_unanswerable=True)
    assert [item.id for item in with_unknown] == ["disfl-00000", "disfl-00001", "disfl-00002"]
    assert with_unknown[2].answers == ["unknown"]


def test_tokenize_like_passage() -> None:
    assert tokenize_like_passage("design-build, partnering") == "design - build , partnering"
    assert tokenize_like_passage("Earth's") == "Earth ' s"


def test_xsum_ids_and_text(tmp_path: Path) -> None:
    _write_task(tmp_path, XSUM, XSUM_EXAMPLES)
    first, second = load_xsum(tmp_path)
    assert first.id == "xsum-test-0"
    assert first.document.startswith("Since late November") and "\nThe season" in first.document
    assert first.summary == "Skiing in Scotland looks set to continue into June."
    assert (second.id, second.document, second.summary) == (
        "xsum-00001",
        "A short article.",
        "A summary.",
    )


def test_loading_is_deterministic(tmp_path: Path) -> None:
    _write_task(tmp_path, KNOWLEDGE_CONFLICTS, KC_EXAMPLES)
    assert load_knowledge_conflicts(tmp_path) == load_knowledge_conflicts(tmp_path)


def test_missing_task_says_how_to_fetch(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match=r"load_tests\.eval\.fetch"):
        load_xsum(tmp_path)
