"""The QA evaluation's question template and decoding limits, shared by every harness.

The documents come first, each its own chunk; the text below follows them. Greedy decoding stops
at the first newline or after ``MAX_TOKENS`` tokens. ``load_tests.eval.quality`` (in process) and
``ragblend selfcheck --eval-items`` (over HTTP) both use these, so their numbers are comparable.
"""

from __future__ import annotations

MAX_TOKENS = 24
STOP = ("\n",)


def question_text(question: str) -> str:
    """The prompt text after the documents: the question and the answer cue."""
    return f"Question: {question}\nAnswer:"
