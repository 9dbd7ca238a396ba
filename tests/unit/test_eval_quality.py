"""The quality harness per dataset: task wiring, report keys and table, items from the CI sample."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import pytest

from load_tests.eval.frontier import frontier
from load_tests.eval.prompts import MultiChunkItem
from load_tests.eval.quality import build_parser, load_items
from load_tests.eval.quality_rows import print_rows, summarize
from load_tests.eval.summaries import ChunkedSummary
from load_tests.eval.tasks import QA_TASK, SUMMARY_TASK, TASKS

SAMPLE = Path(__file__).resolve().parents[1] / "data" / "eval_sample"


def _settings(dataset: str, split: str = "held_out", items: int = 40) -> argparse.Namespace:
    arguments = ["--data", str(SAMPLE), "--dataset", dataset, "--split", split]
    return build_parser().parse_args([*arguments, "--items", str(items)])


def _record(answer: str, ttft: float, **scores: float) -> dict[str, Any]:
    return {"id": "x", "answer": answer, "ttft_s": ttft, "prompt_tokens": 10, **scores}


def test_each_dataset_has_its_task() -> None:
    assert TASKS["xsum"] is SUMMARY_TASK
    assert {TASKS[name] for name in ("knowledge_conflicts", "quoref", "disfl_qa")} == {QA_TASK}
    assert SUMMARY_TASK.scores == ("rouge_l",) and QA_TASK.scores == ("f1", "em")


def test_the_qa_task_asks_the_question_and_scores_f1_and_em() -> None:
    item = MultiChunkItem("q", "Who?", ["doc"], 0, ["Ada Lovelace"], [], [])
    assert QA_TASK.chat and QA_TASK.prompt_text(item).endswith("Question: Who?")
    assert QA_TASK.score(item, "Lovelace") == {"f1": pytest.approx(2 / 3), "em": 0.0}


def test_the_summary_task_scores_rouge_l() -> None:
    item = ChunkedSummary("s", ["a", "b"], "Rain fell in Leeds.")
    assert SUMMARY_TASK.prompt_text(item).endswith("Summary:")
    assert SUMMARY_TASK.score(item, "rain fell in leeds") == {"rouge_l": 1.0}


def test_qa_rows_keep_the_keys_frontier_reads() -> None:
    records = {
        "full": [_record("a", 1.0, f1=1.0, em=1.0), _record("b", 1.0, f1=0.5, em=0.0)],
        "reuse": [_record("a", 0.25, f1=1.0, em=1.0), _record("c", 0.25, f1=0.0, em=0.0)],
    }
    full, reuse = summarize(records, QA_TASK.scores)
    assert list(reuse) == [
        "mode", "f1", "f1_ci95", "em", "median_ttft_s",
        "agree_with_full", "f1_gap_to_full", "f1_gap_ci95", "speedup_vs_full",
    ]  # fmt: skip
    assert (reuse["f1"], reuse["em"], reuse["agree_with_full"]) == (0.5, 0.5, 0.5)
    assert (reuse["f1_gap_to_full"], reuse["speedup_vs_full"]) == (-0.25, 4.0)
    low, high = reuse["f1_gap_ci95"]
    assert low < -0.25 < high  # item gaps 0 and -0.5, paired
    assert full["f1_gap_to_full"] == 0.0 and full["f1_gap_ci95"] == [0.0, 0.0]
    assert [row["mode"] for row in frontier([full, reuse])] == ["reuse"]


def test_rows_report_the_mean_recomputed_share_of_chunk_tokens() -> None:
    records = {
        "full": [_record("a", 1.0, f1=1.0, em=1.0, recomputed_share=1.0)] * 2,
        "blend@0.2/mass=0.5": [
            _record("a", 0.5, f1=1.0, em=1.0, recomputed_share=0.05),
            _record("a", 0.5, f1=1.0, em=1.0, recomputed_share=0.15),
        ],
    }
    full, adaptive = summarize(records, QA_TASK.scores)
    assert (full["recomputed_share"], adaptive["recomputed_share"]) == (1.0, 0.1)


def test_answers_whose_statistics_were_lost_leave_the_share_out() -> None:
    records = {
        "full": [_record("a", 1.0, f1=1.0, em=1.0, recomputed_share=1.0)] * 3,
        "blend@0.1": [
            _record("a", 0.5, f1=1.0, em=1.0, recomputed_share=0.1),
            _record("a", 0.5, f1=1.0, em=1.0, recomputed_share=None),  # ended on a stop string
            _record("a", 0.5, f1=1.0, em=1.0, recomputed_share=0.2),
        ],
        "reuse": [_record("a", 0.5, f1=1.0, em=1.0, recomputed_share=None)] * 3,
    }
    _, blend, reuse = summarize(records, QA_TASK.scores)
    assert blend["recomputed_share"] == 0.15
    assert "recomputed_share" not in reuse


def test_summary_rows_are_keyed_by_rouge_l(capsys: pytest.CaptureFixture[str]) -> None:
    records = {
        "full": [_record("a", 2.0, rouge_l=0.4), _record("b", 2.0, rouge_l=0.2)],
        "blend@0.15": [_record("a", 1.0, rouge_l=0.4), _record("b", 1.0, rouge_l=0.2)],
    }
    rows = summarize(records, SUMMARY_TASK.scores)
    assert rows[1]["rouge_l"] == 0.3 and rows[1]["rouge_l_gap_to_full"] == 0.0
    assert rows[1]["agree_with_full"] == 1.0 and rows[1]["speedup_vs_full"] == 2.0
    assert "f1" not in rows[1] and "em" not in rows[1]
    print_rows(rows, SUMMARY_TASK.scores)
    header, *lines = capsys.readouterr().out.splitlines()
    assert header.split()[:2] == ["mode", "Rouge-L"] and "EM" not in header
    assert lines[1].split()[:2] == ["blend@0.15", "0.300"]


def test_the_sample_qa_items_split_with_five_distractors() -> None:
    tune = load_items(_settings("knowledge_conflicts", "tune"))
    held_out = load_items(_settings("knowledge_conflicts"))
    assert (len(tune), len(held_out)) == (13, 11)
    assert all(len(item.documents) == 6 for item in (*tune, *held_out))
    few = load_items(_settings("knowledge_conflicts", items=2))
    assert len(few) == 2 and {item.id for item in few} <= {item.id for item in held_out}


def test_the_sample_xsum_articles_pass_the_default_bounds() -> None:
    tune, held_out = (load_items(_settings("xsum", split)) for split in ("tune", "held_out"))
    assert [item.id for item in tune] == ["xsum-test-70", "xsum-test-504"]
    assert [item.id for item in held_out] == ["xsum-test-548", "xsum-test-687"]
    for item in (*tune, *held_out):
        assert len(item.documents) == 6
        assert all(75 <= len(document.split()) <= 375 for document in item.documents)
