"""Multi-chunk items and splits: gold once, distractors from other items, seeded and stable."""

from __future__ import annotations

import pytest

from load_tests.eval.datasets import QAItem
from load_tests.eval.prompts import build_multichunk_items, split, subsample

TOPICS = [
    "volcano", "harbour", "railway", "glacier", "orchard", "lighthouse", "monastery", "canal",
    "observatory", "vineyard", "quarry", "bridge", "cathedral", "desert", "reef", "prairie",
]  # fmt: skip


def _items() -> list[QAItem]:
    items = [
        QAItem(
            id=f"q-{i:02d}",
            question=f"Who built the {topic}?",
            passage=f"The {topic} was built by Builder{i} in {1800 + i} near {topic}ville.",
            answers=[f"Builder{i}"],
        )
        for i, topic in enumerate(TOPICS)
    ]
    # a second question on q-00's passage (Quoref / Disfl-QA share paragraphs)
    items.append(QAItem("q-shared", "When was the volcano built?", items[0].passage, ["1800"]))
    # q-00's paragraph with the entity swapped (knowledge-conflict near-duplicate)
    swapped = items[0].passage.replace("Builder0", "Somebody Else")
    items.append(QAItem("q-swapped", "Who made the volcano?", swapped, ["Somebody Else"]))
    return items


def _by_id(items: list[QAItem]) -> dict[str, QAItem]:
    return {item.id: item for item in items}


def test_gold_present_exactly_once_among_other_items() -> None:
    items = _items()
    by_id = _by_id(items)
    for built in build_multichunk_items(items, distractors=5, seed=3):
        gold = by_id[built.id]
        assert len(built.documents) == 6
        assert built.documents[built.gold_index] == gold.passage
        assert built.documents.count(gold.passage) == 1
        assert built.id not in built.distractor_ids and len(set(built.distractor_ids)) == 5
        others = [d for i, d in enumerate(built.documents) if i != built.gold_index]
        assert others == [by_id[d].passage for d in built.distractor_ids]
        assert built.answers == gold.answers and built.question == gold.question


def test_near_duplicates_and_answer_bearing_passages_are_never_distractors() -> None:
    items = _items()
    for seed in range(20):
        built = {b.id: b for b in build_multichunk_items(items, seed=seed)}
        for gold in ("q-00", "q-shared", "q-swapped"):
            assert not {"q-00", "q-shared", "q-swapped"} & set(built[gold].distractor_ids)


def test_shuffle_is_deterministic_per_seed_and_independent_of_order() -> None:
    items = _items()
    first = build_multichunk_items(items, seed=7)
    assert first == build_multichunk_items(items, seed=7)
    reversed_run = build_multichunk_items(list(reversed(items)), seed=7)
    assert [b.id for b in reversed_run] == [item.id for item in reversed(items)]
    assert sorted(reversed_run, key=lambda b: b.id) == sorted(first, key=lambda b: b.id)
    assert first != build_multichunk_items(items, seed=8)
    positions = {
        b.gold_index for seed in range(5) for b in build_multichunk_items(items, seed=seed)
    }
    assert len(positions) > 3  # the gold passage is not pinned to one slot


def test_max_passage_tokens_drops_long_passages_everywhere() -> None:
    items = _items()
    long_item = QAItem("q-long", "Who wrote the saga?", "saga " * 50 + "by Nobody.", ["Nobody"])
    built = build_multichunk_items([*items, long_item], max_passage_tokens=20, seed=1)
    assert "q-long" not in {b.id for b in built}
    assert all("q-long" not in b.distractor_ids for b in built)
    assert len(built) == len(items)


def test_too_few_distinct_passages_is_an_error() -> None:
    with pytest.raises(ValueError, match="distinct passages"):
        build_multichunk_items(_items()[:4], distractors=5)
    with pytest.raises(ValueError, match="unique"):
        build_multichunk_items([*_items(), _items()[0]])


def test_split_is_disjoint_complete_and_stable() -> None:
    items = [QAItem(f"id-{i}", "q", f"p{i}", ["a"]) for i in range(1000)]
    tune, held_out = split(items, tune_fraction=0.5, seed=1)
    assert {i.id for i in tune}.isdisjoint({i.id for i in held_out})
    assert len(tune) + len(held_out) == len(items)
    assert 400 < len(tune) < 600
    assert split(items, seed=1) == (tune, held_out)
    again_tune, _ = split(list(reversed(items)), seed=1)
    assert {i.id for i in again_tune} == {i.id for i in tune}
    assert {i.id for i in split(items[:100], seed=1)[0]} == {i.id for i in tune if i in items[:100]}
    assert split(items, seed=2)[0] != tune
    assert split(items, tune_fraction=0.0)[0] == [] and split(items, tune_fraction=1.0)[1] == []
    with pytest.raises(ValueError):
        split(items, tune_fraction=1.5)


def test_split_by_group_keeps_shared_passages_together() -> None:
    items = [QAItem(f"id-{i}", f"q{i}", f"passage {i % 10}", ["a"]) for i in range(100)]
    tune, held_out = split(items, group=lambda item: item.passage)
    assert {i.passage for i in tune}.isdisjoint({i.passage for i in held_out})


def test_subsample_is_stable_and_in_input_order() -> None:
    items = [QAItem(f"id-{i}", "q", f"p{i}", ["a"]) for i in range(50)]
    picked = subsample(items, 10, seed=4)
    assert len(picked) == 10 and picked == subsample(items, 10, seed=4)
    assert [items.index(p) for p in picked] == sorted(items.index(p) for p in picked)
    assert {p.id for p in subsample(items, 5, seed=4)} <= {p.id for p in picked}
