"""The ragblend-vs-vLLM benchmark's pure parts: both servers get the same passages, and its
figures (percentiles, ratios, time per output token, requests/s at a TTFT target) are right."""

from __future__ import annotations

from dataclasses import replace

import pytest

from load_tests import peer_summary as summary
from load_tests import peer_traffic as traffic
from load_tests.eval.prompts import MultiChunkItem
from load_tests.eval.qa_prompt import question_text


def _items(count: int = 3, passages: int = 5) -> list[MultiChunkItem]:
    return [
        MultiChunkItem(
            id=f"kc-{number}",
            question=f"question {number}?",
            documents=[f"passage {number}.{index} " + "word " * 20 for index in range(passages)],
            gold_index=number % passages,
            answers=[f"answer {number}"],
            distractor_ids=[],
            conflicting_answers=[],
        )
        for number in range(count)
    ]


def _vllm_passages(
    request: traffic.PeerRequest, item: MultiChunkItem, sent: bool = False
) -> list[str]:
    """The item's passages (``sent``: as the sent-document phases tag them) in the order they
    stand pasted in vLLM's user message."""
    content = request.vllm["messages"][-1]["content"]
    assert content.endswith(question_text(item.question))
    return sorted(traffic.sent_passages(item) if sent else item.documents, key=content.index)


@pytest.mark.parametrize("phase", ["first_sight", "reordered", "long_answers"])
def test_sent_passages_are_the_ones_vllm_gets_pasted_in_the_same_order(phase: str) -> None:
    for item, request in zip(_items(), traffic.phase_requests(phase, _items()), strict=True):
        question = item.question
        if phase == "long_answers":
            question = traffic.LONG_ANSWER.format(question)
            assert not request.answers and request.full_length  # a story: no F1, all tokens
            item = replace(item, question=question)
        else:
            assert request.answers == item.answers and not request.full_length
        assert request.ragblend["documents"] == _vllm_passages(request, item, sent=True)
        assert request.ragblend["messages"][-1]["content"] == question_text(question)


def test_reordered_passages_are_a_permutation_that_moves_the_first() -> None:
    items = _items(count=20)
    for item, request in zip(items, traffic.phase_requests("reordered", items), strict=True):
        documents = request.ragblend["documents"]
        assert sorted(documents) == sorted(traffic.sent_passages(item))
        assert documents[0] != traffic.sent_passages(item)[0]
    assert traffic.reordered(1, "one") == [0]
    assert traffic.reordered(6, "seed") == traffic.reordered(6, "seed")


def test_pasted_and_library_phases_hold_the_items_passages_for_both_servers() -> None:
    items = _items()
    for item, request in zip(items, traffic.phase_requests("pasted", items), strict=True):
        assert request.ragblend["blend"] == {"segment": True}
        assert request.ragblend["messages"] == request.vllm["messages"]
        assert sorted(_vllm_passages(request, item, sent=True)) == sorted(
            traffic.sent_passages(item)
        )
    for item, request in zip(items, traffic.phase_requests("library", items), strict=True):
        ids = {traffic.document_id(passage) for passage in item.documents}
        assert set(request.ragblend["retrieval"]["document_ids"]) == ids
        assert request.ragblend["retrieval"]["top_k"] == len(ids)
        assert sorted(_vllm_passages(request, item)) == sorted(item.documents)


def test_a_passage_two_questions_share_is_new_to_each_first_sight() -> None:
    first, second = _items(count=2)
    shared = first.documents[0]
    second.documents[1] = shared
    sent = traffic.phase_requests("first_sight", [first, second])
    assert sent[0].ragblend["documents"][0] != sent[1].ragblend["documents"][1]
    assert all(shared in request.vllm["messages"][-1]["content"] for request in sent)
    again = traffic.phase_requests("reordered", [first, second])
    for request, seen in zip(again, sent, strict=True):
        assert sorted(request.ragblend["documents"]) == sorted(seen.ragblend["documents"])


def test_phases_without_passages_send_one_body_to_both() -> None:
    items = _items(count=2)
    for phase in ("chat", "multi_turn", "tools", "completions"):
        for request in traffic.phase_requests(phase, items, turns=3):
            assert request.vllm == request.ragblend
    turns = traffic.phase_requests("multi_turn", items, turns=3)
    assert [len(request.vllm["messages"]) for request in turns[:3]] == [2, 4, 6]
    assert [bool(request.answers) for request in turns[:3]] == [True, False, False]
    assert len(traffic.phase_requests("tools", items)[0].vllm["tools"]) == traffic.TOOLS
    assert [len(block) for block in traffic.blocks(turns, 4)] == [4, 2]
    with pytest.raises(ValueError, match="unknown phase"):
        traffic.phase_requests("nope", items)


def test_time_per_output_token_and_first_line() -> None:
    assert summary.tpot(1.0, 2.0, 11) == pytest.approx(0.1)
    assert summary.tpot(1.0, 1.0, 1) is None
    assert summary.tpot(None, None, 5) is None
    assert summary.first_line("\n  Oslo \nand more") == "Oslo"


def _record(server: str, ttft: float, **fields: object) -> dict[str, object]:
    return {"server": server, "error": None, "ttft_s": ttft, "tpot_s": ttft / 10, **fields}


def test_phase_summary_percentiles_ratios_and_requests_per_second_at_target() -> None:
    records = [_record("vllm", ttft, f1=1.0) for ttft in (1.0, 2.0, 3.0, 4.0, 5.0)]
    records += [
        _record("ragblend", ttft, f1=0.5, blend={"chunks_hit": 2, "chunks_missed": 1})
        for ttft in (0.5, 1.0, 1.5, 2.0, 2.5)
    ]
    records.append({"server": "ragblend", "error": "500 boom", "ttft_s": None})
    row = summary.phase_summary("p", records, {"vllm": 10.0, "ragblend": 4.0}, target_s=2.0)
    vllm, ragblend = row["vllm"], row["ragblend"]
    assert vllm["ttft_p50_s"] == 3.0 and vllm["ttft_p95_s"] == pytest.approx(4.8)
    assert ragblend["ttft_p50_s"] == 1.5 and ragblend["errors"] == 1
    assert row["ttft_p50_ratio"] == pytest.approx(2.0)
    assert row["tpot_p50_ratio"] == pytest.approx(2.0)
    assert vllm["met_target"] == 2 and vllm["requests_per_s_at_target"] == pytest.approx(0.2)
    assert ragblend["met_target"] == 4 and ragblend["requests_per_s_at_target"] == 1.0
    assert (vllm["f1"], ragblend["f1"]) == (1.0, 0.5)
    assert (ragblend["chunks_hit"], ragblend["chunks_missed"]) == (10, 5)
    cells = summary.table_row(row)
    assert len(cells) == len(summary.TABLE_HEADER) and cells[5] == "2.00"


def test_a_server_without_answers_has_no_figures() -> None:
    row = summary.phase_summary("p", [], {}, target_s=1.0)
    assert row["vllm"]["ttft_p50_s"] is None and row["ttft_p50_ratio"] is None
    assert row["ragblend"]["requests_per_s_at_target"] == 0.0
    assert set(summary.table_row(row)[1:9]) == {"n/a"}
    assert summary.table_row(row)[13] == "n/a/n/a"
