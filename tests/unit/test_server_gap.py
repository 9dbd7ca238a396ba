"""``ragblend selfcheck --eval-items``: request bodies, report arithmetic, missing data, HTTP."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import httpx
import pytest

from gateway.openai.protocol import ChatCompletionRequest
from load_tests.eval.fetch import DEFAULT_CACHE, is_fetched
from load_tests.eval.metrics import paired_diff_ci95
from load_tests.eval.prompts import MultiChunkItem
from load_tests.eval.qa_prompt import question_text
from load_tests.eval.server_gap import (
    EVAL_MODES,
    EvalDataMissing,
    Reply,
    completion_body,
    evaluate,
    held_out_items,
    print_rows,
    run,
    summarize,
    warmup_body,
)

DOCUMENTS = ["Paris is in France.", "Rome is in Italy.", "Oslo is in Norway."]


def _item(index: int, answer: str) -> MultiChunkItem:
    return MultiChunkItem(
        id=f"kc-{index}",
        question=f"question {index}?",
        documents=[f"passage {index} {name}" for name in ("a", "b", "c")],
        gold_index=1,
        answers=[answer],
        distractor_ids=[],
        conflicting_answers=[],
    )


def test_question_text_ends_with_the_question() -> None:
    assert question_text("Who?").endswith("\nQuestion: Who?")


@pytest.mark.parametrize(("name", "blend"), EVAL_MODES)
def test_each_mode_is_a_greedy_completion_with_the_documents(
    name: str, blend: dict[str, Any]
) -> None:
    body = completion_body("m", DOCUMENTS, "Where is Paris?", blend)
    assert body == {
        "model": "m",
        "messages": [{"role": "user", "content": question_text("Where is Paris?")}],
        "documents": DOCUMENTS,
        "max_tokens": 24,
        "temperature": 0,
        "stop": ["\n"],
        "blend": blend,
    }
    request = ChatCompletionRequest.model_validate(body)
    assert request.blend is not None and request.blend.recompute_ratio is None
    assert request.blend.mode == name.split("@")[0]


def test_the_modes_are_full_blend_at_the_server_default_and_reuse() -> None:
    assert dict(EVAL_MODES) == {
        "full": {"mode": "full"},
        "blend@default": {"mode": "blend"},
        "reuse": {"mode": "reuse"},
    }


def test_warmup_stores_the_chunks_in_another_order() -> None:
    item = _item(0, "x")
    body = warmup_body("m", item)
    assert body["documents"] == item.documents[::-1]
    assert body["blend"] == {"mode": "blend"} and body["max_tokens"] == 1
    ChatCompletionRequest.model_validate(body)


def _replies(answers: list[str], reused: int = 0) -> list[Reply]:
    return [Reply(answer, reused, 100) for answer in answers]


def test_summary_reports_f1_the_paired_gap_and_agreement() -> None:
    golds = [["Paris"], ["Rome"], ["Oslo"], ["Bern"]]
    replies = {
        "full": _replies(["Paris", "Rome", "Oslo", "Bern"]),
        "blend@default": _replies(["Paris", "Rome", "Oslo", "Vienna"], reused=90),
        "reuse": _replies(["Paris", "Milan", "Lima", "Vienna"], reused=95),
    }
    rows = {row.mode: row for row in summarize(replies, golds)}

    full, blend, reuse = rows["full"], rows["blend@default"], rows["reuse"]
    assert full.f1[0] == 1.0 and full.gap_to_full is None and full.agree_with_full == 1.0
    assert blend.f1[0] == pytest.approx(0.75)
    assert blend.gap_to_full == pytest.approx(paired_diff_ci95([1, 1, 1, 0], [1, 1, 1, 1]))
    mean, low, high = blend.gap_to_full
    assert mean == pytest.approx(-0.25) and low < mean < high
    assert blend.agree_with_full == 0.75 and blend.reused == pytest.approx(0.9)
    assert reuse.gap_to_full is not None and reuse.gap_to_full[0] == pytest.approx(-0.75)
    assert reuse.agree_with_full == 0.25 and reuse.reused == pytest.approx(0.95)


def test_summary_of_one_item_prints_without_an_interval(capsys: pytest.CaptureFixture) -> None:
    replies = {"full": _replies(["Paris"]), "reuse": _replies(["Rome"])}
    rows = summarize(replies, [["Paris"]])
    assert math.isnan(rows[1].f1[1])
    print_rows(rows)
    lines = capsys.readouterr().out.splitlines()
    assert lines[1].split()[:3] == ["full", "1.000", "-"]
    assert lines[2].split()[:3] == ["reuse", "0.000", "-1.000"]


def test_missing_data_says_how_to_fetch_it(tmp_path: Path) -> None:
    with pytest.raises(EvalDataMissing, match=r"python -m load_tests\.eval\.fetch --cache"):
        held_out_items(tmp_path, 5)


def test_command_stops_before_contacting_the_server_when_data_is_missing(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    argv = ["--url", "http://127.0.0.1:9", "--items", "3", "--data", str(tmp_path)]
    assert run(argv) == 1
    assert "python -m load_tests.eval.fetch" in capsys.readouterr().err


@pytest.mark.skipif(not is_fetched(DEFAULT_CACHE), reason="BIG-bench data not fetched")
def test_held_out_items_are_gold_plus_five_distractors() -> None:
    items = held_out_items(DEFAULT_CACHE, 3)
    assert len(items) == 3
    for item in items:
        assert len(item.documents) == 6 and len(item.distractor_ids) == 5
        assert item.id.startswith("kc-")


def test_evaluate_sends_a_warmup_then_every_mode_per_item() -> None:
    sent: list[dict[str, Any]] = []

    def respond(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        sent.append(body)
        mode = body["blend"]["mode"]
        reused = 0 if mode == "full" else 80
        return httpx.Response(
            200,
            json={
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": f" {mode} answer\n"},
                        "finish_reason": "stop",
                    }
                ],
                "usage": {"prompt_tokens": 100, "completion_tokens": 2, "total_tokens": 102},
                "blend": {"mode": mode, "reused_tokens": reused},
            },
        )

    items = [_item(0, "a"), _item(1, "b")]
    transport = httpx.MockTransport(respond)
    with httpx.Client(base_url="http://server", transport=transport) as client:
        replies = evaluate(client, "m", items)

    assert [body["blend"]["mode"] for body in sent] == ["blend", "full", "blend", "reuse"] * 2
    assert sent[0] == warmup_body("m", items[0])
    assert sent[1] == completion_body("m", items[0].documents, items[0].question, {"mode": "full"})
    assert replies["full"] == [Reply("full answer", 0, 100)] * 2
    assert replies["reuse"] == [Reply("reuse answer", 80, 100)] * 2
