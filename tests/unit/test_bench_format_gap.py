"""The int8-vs-raw quality comparison's pairing: per item and mode, F1 and agreement (no server)."""

from __future__ import annotations

import pytest

from load_tests.eval.format_gap import answers_by_item, summarize
from load_tests.eval.prompts import MultiChunkItem
from load_tests.eval.server_gap import Reply

GOLDS = [["Paris"], ["Blue Whale"], ["1912"], ["Marie Curie"]]


def replies(answers: list[str], reused: int = 90) -> list[Reply]:
    return [Reply(answer, reused, 100) for answer in answers]


def test_int8_answers_are_compared_item_by_item_with_raw_ones() -> None:
    raw_blend = ["Paris", "the blue whale", "1912", "Pierre Curie"]
    int8_blend = ["paris.", "Blue whale", "1913", "Marie Curie"]
    table = {
        "raw": {"blend@default": replies(raw_blend), "reuse": replies(raw_blend, 100)},
        "int8": {"blend@default": replies(int8_blend), "reuse": replies(raw_blend, 100)},
    }
    blend, reuse = summarize(table, GOLDS)

    assert blend.mode == "blend@default" and blend.items == 4
    assert blend.agreement == pytest.approx(0.5)  # normalization: case, articles, punctuation
    assert blend.raw_f1[0] == pytest.approx((1 + 1 + 1 + 0.5) / 4)
    assert blend.int8_f1[0] == pytest.approx((1 + 1 + 0 + 1) / 4)
    assert blend.int8_minus_raw[0] == pytest.approx(-0.5 / 4)
    assert blend.reused == {"raw": 0.9, "int8": 0.9}
    assert reuse.agreement == 1.0
    assert reuse.int8_minus_raw[:3] == (0.0, 0.0, 0.0)


def test_items_cut_short_by_the_budget_are_scored_on_those_finished() -> None:
    table = {
        "raw": {"blend@default": replies(["Paris"]), "reuse": replies(["Rome"])},
        "int8": {"blend@default": replies(["Paris"]), "reuse": replies(["Paris"])},
    }
    blend, reuse = summarize(table, GOLDS)
    assert (blend.items, blend.agreement, reuse.agreement) == (1, 1.0, 0.0)
    items = [
        MultiChunkItem(str(n), f"question {n}?", ["doc"], 0, gold, [], [])
        for n, gold in enumerate(GOLDS)
    ]
    recorded = answers_by_item(table, items)
    assert len(recorded) == 1
    assert recorded[0]["gold"] == ["Paris"]
    assert recorded[0]["raw/reuse"] == "Rome" and recorded[0]["int8/reuse"] == "Paris"
