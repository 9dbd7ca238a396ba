"""The QA evaluation's user turn and decoding limits, shared by every harness.

QA items go through the chat template: the documents, each its own chunk, then this user text
(the gateway's chat contract puts documents right before the last user message's content).
Measured on 20 tune items with qwen2.5-coder-0.5b-instruct, full prefill: this chat turn scored
F1 0.15 with 5 distractors (0.43 with the gold passage alone); plain-text "Question: ...
Answer:" prompts, with or without instructions or few-shot examples, scored 0.01-0.09 and
rambled. Greedy decoding stops at the first newline or after ``MAX_TOKENS`` tokens.
``load_tests.eval.quality`` (in process) and ``ragblend selfcheck --eval-items`` (over HTTP) both
use these, so their numbers are comparable.
"""

from __future__ import annotations

MAX_TOKENS = 24
STOP = ("\n",)


def question_text(question: str) -> str:
    """The user message that follows the documents."""
    return (
        "Answer the question using the passages above, which are true even where they "
        f"contradict what you know. Reply with just the answer.\nQuestion: {question}"
    )
