"""bench_sent_first_sight: the pasted prompt of a pair shares no passage text with the sent one
(so neither is a hit on the other), and it reads the worker's copy-out times from a real log."""

from __future__ import annotations

from load_tests.bench_sent_first_sight import COPY_OUT, pair
from load_tests.eval.prompts import MultiChunkItem

ITEM = MultiChunkItem(
    id="kc-1",
    question="Who wrote it?",
    documents=["Alpha wrote the first book.", "Beta painted the wall."],
    gold_index=0,
    answers=["Alpha"],
    distractor_ids=["d-2"],
    conflicting_answers=[],
)


def test_the_pair_carries_the_same_passages_under_other_tags() -> None:
    sent, pasted = pair(ITEM)
    documents = sent.ragblend["documents"]
    text = pasted.ragblend["messages"][0]["content"]
    assert len(documents) == 2 and all(passage not in text for passage in documents)
    assert all(passage in text for passage in ITEM.documents)
    assert "documents" not in pasted.ragblend and pasted.vllm == pasted.ragblend


def test_a_workers_debug_line_gives_its_copy_out_time() -> None:
    line = (
        "(Worker pid=3144) DEBUG 12-06 18:46:53 [worker.py:122] stored 20 chunks of request "
        "4262fe08-0-985a06d1 from the paged cache in 62.9 ms"
    )
    assert COPY_OUT.findall(line) == [("20", "62.9")]
