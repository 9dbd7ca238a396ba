"""Answer-quality metrics: SQuAD exact match and token F1, Rouge-L, agreement, confidence intervals.

Rouge-L is implemented here (no dependency) to match ``rouge_score``'s
``RougeScorer(["rougeL"], use_stemmer=False)``: lowercase, every run of characters other than
``a-z0-9`` is a separator, F-measure of LCS precision and recall.
"""

from __future__ import annotations

import math
import re
import string
from collections import Counter
from collections.abc import Sequence

_PUNCTUATION = frozenset(string.punctuation)
_ARTICLES = re.compile(r"\b(a|an|the)\b")
_ROUGE_SEPARATOR = re.compile(r"[^a-z0-9]+")
_Z95 = 1.959963984540054


def normalize_answer(text: str) -> str:
    """SQuAD normalization: lowercase, drop punctuation and articles, collapse whitespace."""
    text = "".join(ch for ch in text.lower() if ch not in _PUNCTUATION)
    return " ".join(_ARTICLES.sub(" ", text).split())


def _check_answers(answers: Sequence[str]) -> None:
    if isinstance(answers, str) or not answers:
        raise ValueError("answers must be a non-empty list of strings")


def exact_match(prediction: str, answers: Sequence[str]) -> float:
    """1.0 if the normalized prediction equals any normalized answer, else 0.0."""
    _check_answers(answers)
    pred = normalize_answer(prediction)
    return float(any(pred == normalize_answer(answer) for answer in answers))


def _token_f1(prediction: str, answer: str) -> float:
    pred, gold = normalize_answer(prediction).split(), normalize_answer(answer).split()
    if not pred or not gold:
        return float(pred == gold)
    common = sum((Counter(pred) & Counter(gold)).values())
    if common == 0:
        return 0.0
    precision, recall = common / len(pred), common / len(gold)
    return 2 * precision * recall / (precision + recall)


def f1(prediction: str, answers: Sequence[str]) -> float:
    """SQuAD token-overlap F1, the maximum over the answers."""
    _check_answers(answers)
    return max(_token_f1(prediction, answer) for answer in answers)


def rouge_tokens(text: str) -> list[str]:
    """Rouge tokens: lowercase alphanumeric runs."""
    return _ROUGE_SEPARATOR.sub(" ", text.lower()).split()


def lcs_length(a: Sequence[str], b: Sequence[str]) -> int:
    """Length of the longest common subsequence (O(len(a) * len(b)) time, O(len(b)) memory)."""
    previous = [0] * (len(b) + 1)
    for token in a:
        current = [0]
        for j, other in enumerate(b):
            current.append(previous[j] + 1 if token == other else max(previous[j + 1], current[j]))
        previous = current
    return previous[-1]


def rouge_l(prediction: str, reference: str) -> float:
    """Rouge-L F-measure of a prediction against one reference (0.0 if either is empty)."""
    pred, ref = rouge_tokens(prediction), rouge_tokens(reference)
    if not pred or not ref:
        return 0.0
    common = lcs_length(pred, ref)
    if common == 0:
        return 0.0
    precision, recall = common / len(pred), common / len(ref)
    return 2 * precision * recall / (precision + recall)


def mean_ci95(values: Sequence[float]) -> tuple[float, float, float]:
    """(mean, low, high): normal-approximation 95% interval, sample standard deviation.

    A single value has no spread estimate: its bounds are NaN.
    """
    n = len(values)
    if n == 0:
        raise ValueError("mean_ci95 needs at least one value")
    mean = math.fsum(values) / n
    if n == 1:
        return mean, math.nan, math.nan
    variance = math.fsum((v - mean) ** 2 for v in values) / (n - 1)
    half = _Z95 * math.sqrt(variance / n)
    return mean, mean - half, mean + half


def paired_diff_ci95(a: Sequence[float], b: Sequence[float]) -> tuple[float, float, float]:
    """95% interval of mean(a - b) over paired scores (e.g. blend vs full on the same items)."""
    if len(a) != len(b):
        raise ValueError(f"paired scores differ in length: {len(a)} vs {len(b)}")
    return mean_ci95([x - y for x, y in zip(a, b, strict=True)])


def agreement(a: Sequence[str], b: Sequence[str]) -> float:
    """Fraction of positions whose normalized answers are identical."""
    if len(a) != len(b):
        raise ValueError(f"answer lists differ in length: {len(a)} vs {len(b)}")
    if not a:
        raise ValueError("agreement needs at least one pair")
    same = sum(normalize_answer(x) == normalize_answer(y) for x, y in zip(a, b, strict=True))
    return same / len(a)
