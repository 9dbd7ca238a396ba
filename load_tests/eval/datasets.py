"""Loaders for the BIG-bench evaluation tasks fetched by ``load_tests.eval.fetch``.

Each task is ``<cache>/<task>/task.json`` with ``{"examples": [{"input", "target", ...}]}``.
Formats found in bigbench 1.0.0 (ids are ``<prefix>-<index in the file>``, so they are stable):

- knowledge conflicts (17,528): input ``"\\nQuestion: <q>\\nContext: <paragraph>"``, target one str
  (the entity swapped into the paragraph), ``target_scores`` {swapped: 1, original: 0}. Text is
  tokenized Natural Questions style (``Phineas 's``, ``` `` ```). The original entity is kept as
  ``conflicting_answers``: answering it means the model ignored the passage.
- Quoref (6,500): input ``"Passage: <p> \\nQuestion: <q>?"``, target a list of spans, each with a
  trailing period that we strip. Several spans form ONE answer ("first names of the people who"),
  so multi-span items are skipped by default or joined.
- Disfl-QA (8,000): input ``"<disfluent q> ?  \\ncontext: <SQuAD 2.0 paragraph>"``, target a str;
  ``"unknown"`` marks unanswerable items (skipped by default); 35 questions are broken (``# VALUE
  !``). Paragraphs are tokenized (``Earth ' s``, ``40 , 000``) but targets are not, so the answer
  tokenized the passage's way is added as an alternative when it occurs in the passage.
- XSum (1,001): input a BBC article, target its one-sentence summary, comment ``xsum-test-<n>``.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from load_tests.eval.fetch import DEFAULT_CACHE

KNOWLEDGE_CONFLICTS = "contextual_parametric_knowledge_conflicts"
QUOREF = "natural_instructions/subtask002_quoref_answer_generation"
DISFL_QA = "disfl_qa"
XSUM = "gem/xsum"

_KC_INPUT = re.compile(r"\s*Question:\s*(?P<q>.*?)\s*\nContext:\s*(?P<p>.*?)\s*\Z", re.S)
_QUOREF_INPUT = re.compile(r"\s*Passage:\s*(?P<p>.*)\nQuestion:\s*(?P<q>.*?)\s*\Z", re.S)
_DISFL_INPUT = re.compile(r"(?P<q>.*?)\s*\ncontext:\s*(?P<p>.*?)\s*\Z", re.S)
_UNANSWERABLE = "unknown"


@dataclass(frozen=True)
class QAItem:
    """A question over one passage with its acceptable answers (any one is correct)."""

    id: str
    question: str
    passage: str
    answers: list[str]
    conflicting_answers: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class SummaryItem:
    """A document with its reference summary."""

    id: str
    document: str
    summary: str


def read_examples(root: Path, task: str) -> list[dict[str, Any]]:
    """The raw examples of one task; FileNotFoundError tells how to fetch them."""
    path = Path(root) / task / "task.json"
    if not path.is_file():
        raise FileNotFoundError(f"{path} missing: run `python -m load_tests.eval.fetch` first")
    return list(json.loads(path.read_text(encoding="utf-8"))["examples"])


def _match(pattern: re.Pattern[str], example: dict[str, Any], item_id: str) -> re.Match[str]:
    match = pattern.match(example["input"])
    if match is None:
        raise ValueError(f"{item_id}: input not in the expected format: {example['input'][:80]!r}")
    return match


def tokenize_like_passage(text: str) -> str:
    """Space out punctuation like the tokenized SQuAD passages (``40,000`` -> ``40 , 000``)."""
    return " ".join(re.sub(r"([^\w\s])", r" \1 ", text).split())


def parse_knowledge_conflict(example: dict[str, Any], index: int) -> QAItem:
    """One knowledge-conflict example: question and context split apart."""
    item_id = f"kc-{index:05d}"
    match = _match(_KC_INPUT, example, item_id)
    target = str(example["target"]).strip()
    scores: dict[str, float] = example.get("target_scores", {})
    conflicting = [answer for answer, score in scores.items() if not score and answer != target]
    return QAItem(item_id, match["q"], match["p"], [target], conflicting)


def parse_quoref(
    example: dict[str, Any], index: int, multi_span: Literal["skip", "join"] = "skip"
) -> QAItem | None:
    """One Quoref example; None for a multi-span answer when ``multi_span`` is "skip"."""
    item_id = f"quoref-{index:05d}"
    match = _match(_QUOREF_INPUT, example, item_id)
    targets = example["target"] if isinstance(example["target"], list) else [example["target"]]
    spans = [re.sub(r"\.\Z", "", str(t).strip()).strip() for t in targets]
    if len(spans) > 1:
        if multi_span == "skip":
            return None
        answers = [", ".join(spans), " and ".join(spans)]
    else:
        answers = spans
    return QAItem(item_id, match["q"], match["p"].strip(), answers)


def parse_disfl_qa(
    example: dict[str, Any], index: int, include_unanswerable: bool = False
) -> QAItem | None:
    """One Disfl-QA example; None for a broken question or (by default) an unanswerable one."""
    item_id = f"disfl-{index:05d}"
    match = _match(_DISFL_INPUT, example, item_id)
    question, passage = match["q"].strip(), match["p"]
    target = str(example["target"]).strip()
    if not re.search(r"[a-z]", question):
        return None  # "# VALUE !" and similar spreadsheet debris
    if target == _UNANSWERABLE and not include_unanswerable:
        return None
    answers = [target]
    spaced = tokenize_like_passage(target)
    if spaced != target and spaced in passage:
        answers.append(spaced)
    return QAItem(item_id, question, passage, answers)


def parse_xsum(example: dict[str, Any], index: int) -> SummaryItem:
    """One XSum example; the id comes from its comment when present."""
    item_id = str(example.get("comment") or f"xsum-{index:05d}")
    return SummaryItem(item_id, str(example["input"]).strip(), str(example["target"]).strip())


def load_knowledge_conflicts(root: Path = DEFAULT_CACHE) -> list[QAItem]:
    """All knowledge-conflict items in file order."""
    examples = read_examples(root, KNOWLEDGE_CONFLICTS)
    return [parse_knowledge_conflict(ex, i) for i, ex in enumerate(examples)]


def load_quoref(
    root: Path = DEFAULT_CACHE, multi_span: Literal["skip", "join"] = "skip"
) -> list[QAItem]:
    """Quoref items in file order (single-span answers only unless ``multi_span="join"``)."""
    parsed = (parse_quoref(ex, i, multi_span) for i, ex in enumerate(read_examples(root, QUOREF)))
    return [item for item in parsed if item is not None]


def load_disfl_qa(root: Path = DEFAULT_CACHE, include_unanswerable: bool = False) -> list[QAItem]:
    """Disfl-QA items in file order, without broken and (by default) unanswerable questions."""
    examples = read_examples(root, DISFL_QA)
    parsed = (parse_disfl_qa(ex, i, include_unanswerable) for i, ex in enumerate(examples))
    return [item for item in parsed if item is not None]


def load_xsum(root: Path = DEFAULT_CACHE) -> list[SummaryItem]:
    """All XSum items in file order."""
    return [parse_xsum(ex, i) for i, ex in enumerate(read_examples(root, XSUM))]


QA_LOADERS = {
    "knowledge_conflicts": load_knowledge_conflicts,
    "quoref": load_quoref,
    "disfl_qa": load_disfl_qa,
}
