"""What each evaluation dataset sets in the quality harness: items, prompt, decoding, scores.

QA datasets (``--dataset knowledge_conflicts|quoref|disfl_qa``) put a gold passage among
distractor passages and score SQuAD F1 and exact match; ``xsum`` cuts one article into chunks
in order and scores Rouge-L (``load_tests/eval/summaries.py``). An item is anything with an
``id`` and its ``documents`` (one chunk each); the task builds the text after them and scores
the greedy completion. The first score is the headline one (mean with a 95% interval, gap to
full prefill); the others are reported as means.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from load_tests.eval import qa_prompt, summaries
from load_tests.eval.datasets import QA_LOADERS, load_xsum
from load_tests.eval.metrics import exact_match, f1
from load_tests.eval.prompts import MultiChunkItem, build_multichunk_items

SCORE_LABELS = {"f1": "F1", "em": "EM", "rouge_l": "Rouge-L"}


@dataclass(frozen=True)
class EvalTask:
    """One dataset's part of the harness; the modes, engine and report are shared."""

    build: Callable[[argparse.Namespace], list[Any]]  # every usable item, before the split
    prompt_text: Callable[[Any], str]  # the text after the chunks
    score: Callable[[Any, str], dict[str, float]]  # keyed by ``scores``
    scores: tuple[str, ...]
    max_tokens: int
    stop: tuple[str, ...]
    chat: bool  # the text after the chunks is a user turn of the chat template, else plain


def _qa_items(args: argparse.Namespace) -> list[MultiChunkItem]:
    questions = QA_LOADERS[args.dataset](Path(args.data))
    return build_multichunk_items(
        questions, args.distractors, args.seed, max_passage_tokens=args.max_passage_words
    )


def _qa_prompt(item: MultiChunkItem) -> str:
    return qa_prompt.question_text(item.question)


def _qa_score(item: MultiChunkItem, answer: str) -> dict[str, float]:
    return {"f1": f1(answer, item.answers), "em": exact_match(answer, item.answers)}


def _summary_items(args: argparse.Namespace) -> list[summaries.ChunkedSummary]:
    bounds = (args.min_chunk_words, args.max_chunk_words)
    return summaries.build_summary_items(load_xsum(Path(args.data)), args.chunks, bounds)


QA_TASK = EvalTask(
    _qa_items, _qa_prompt, _qa_score, ("f1", "em"), qa_prompt.MAX_TOKENS, qa_prompt.STOP, True
)
SUMMARY_TASK = EvalTask(
    _summary_items,
    summaries.summary_prompt,
    summaries.score_summary,
    ("rouge_l",),
    summaries.MAX_TOKENS,
    summaries.STOP,
    False,
)
TASKS = {**dict.fromkeys(QA_LOADERS, QA_TASK), "xsum": SUMMARY_TASK}
