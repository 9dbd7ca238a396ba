"""Comparing a compressed format with raw: per item and mode, F1 and agreement (no server)."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

import pytest

from load_tests.eval.format_gap import read_records, replies_in, summarize
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
    blend, reuse = summarize(table, GOLDS, "int8")

    assert (blend.mode, blend.items, blend.compressed) == ("blend@default", 4, "int8")
    assert blend.agreement == pytest.approx(0.5)  # normalization: case, articles, punctuation
    assert blend.raw_f1[0] == pytest.approx((1 + 1 + 1 + 0.5) / 4)
    assert blend.compressed_f1[0] == pytest.approx((1 + 1 + 0 + 1) / 4)
    assert blend.compressed_minus_raw[0] == pytest.approx(-0.5 / 4)
    assert blend.reused == {"raw": 0.9, "int8": 0.9}
    assert reuse.agreement == 1.0
    assert reuse.compressed_minus_raw[:3] == (0.0, 0.0, 0.0)


def test_recorded_items_are_scored_again_and_a_rerun_resumes_after_them(tmp_path: Path) -> None:
    items = [
        MultiChunkItem(str(n), f"question {n}?", ["doc"], 0, gold, [], [])
        for n, gold in enumerate(GOLDS)
    ]
    record = tmp_path / "gap.items.jsonl"
    lines = [
        {"id": "0", "raw": {"blend@default": "Paris", "reuse": "Rome"}},
        {"id": "1", "raw": {"blend@default": "whale", "reuse": "whale"}},
    ]
    with record.open("w") as out:
        for line in lines:
            answers = {mode: asdict(Reply(text, 80, 100)) for mode, text in line["raw"].items()}
            out.write(json.dumps({"id": line["id"], "raw": answers, "lossless": answers}) + "\n")

    records = read_records(record, items)
    replies_of = replies_in(records, ("raw", "lossless"))
    blend, reuse = summarize(replies_of, GOLDS[:2], "lossless")
    assert (blend.items, blend.agreement, reuse.agreement) == (2, 1.0, 1.0)
    assert reuse.raw_f1[0] == pytest.approx((0 + 2 / 3) / 2)  # "whale" vs "Blue Whale"
    with pytest.raises(ValueError, match="other items"):
        read_records(record, items[1:])
