"""Placing a job's chunks: hits from the store, misses to capture, corrupt streams never raised.

Under tensor parallelism a failure raised inside the blend on one rank would leave the others
waiting in the layers' collectives, so a chunk that turns out corrupt midway must keep feeding
the blend (zeros) and be reported for the worker to redo the job with it as a miss.
"""

from __future__ import annotations

from collections.abc import Iterator

import torch
from torch import Tensor

from engine.connector.metadata import BlendJob
from engine.connector.placement import ChunkPlacer, Placement, cached_layers
from engine.connector.ranks import RankGroup
from engine.contract import BlendPlan, ChunkSpan, Recipe
from engine.kvstore.codec import CorruptEntry
from engine.kvstore.keys import ChunkKey
from engine.kvstore.load_meter import ComputeRate
from engine.kvstore.store import ChunkKVStore
from tests.unit.kv_entries import expect, make_entry

MODEL = "test-model"


class BreakingStream:
    """A layer stream whose entry fails verification after ``good`` layers."""

    def __init__(self, layers: list[tuple[Tensor, Tensor]], good: int) -> None:
        self.layers, self.good, self.closed = layers, good, False

    def __iter__(self) -> Iterator[tuple[int, Tensor, Tensor]]:
        for index, (keys, values) in enumerate(self.layers[: self.good]):
            yield index, keys, values
        raise CorruptEntry("layer checksum mismatch")

    def close(self) -> None:
        self.closed = True


def test_a_stream_corrupt_midway_feeds_zeros_and_is_reported() -> None:
    entry = make_entry(1, layers=4)
    key = ChunkKey.for_chunk(MODEL, entry.token_ids)
    stream = BreakingStream(list(zip(entry.keys, entry.values, strict=True)), good=2)
    placement = Placement()
    layers = list(cached_layers(stream, key, expect(entry), placement))
    assert len(layers) == 4  # the blend still gets every layer, in lockstep with other ranks
    assert torch.equal(layers[1][0], entry.keys[1])
    assert all(not k.any() and not v.any() for k, v in layers[2:])
    assert layers[3][0].shape == entry.keys[3].shape and layers[3][0].dtype == entry.dtype
    assert placement.corrupt == {key} and stream.closed


def test_stored_chunks_hit_and_the_others_are_captured() -> None:
    stored, missing, unreadable = make_entry(10), make_entry(20), make_entry(30)
    store = ChunkKVStore.create(1 << 20)
    for entry in (stored, unreadable):
        store.put(ChunkKey.for_chunk(MODEL, entry.token_ids), entry)
    prompt = [0, *stored.token_ids, *missing.token_ids, *unreadable.token_ids, 7]
    spans = (ChunkSpan(1, 5), ChunkSpan(5, 9), ChunkSpan(9, 13))
    job = BlendJob("r", BlendPlan(Recipe("blend", 0.2), spans), prompt, 0, len(prompt) - 1, [0])
    expectations = {tuple(e.token_ids): expect(e) for e in (stored, missing, unreadable)}
    placer = ChunkPlacer(store, RankGroup(), ComputeRate(), 1, lambda ids: expectations[tuple(ids)])
    bad = {ChunkKey.for_chunk(MODEL, unreadable.token_ids)}
    placement = placer.place(job, MODEL, reusable=True, unreadable=bad)
    assert [(hit.start, hit.end) for hit in placement.hits] == [(1, 5)]
    assert [(c.start, c.end) for c in placement.captures] == [(5, 9), (9, 13)]
    assert placement.keys == [
        ChunkKey.for_chunk(MODEL, e.token_ids) for e in (stored, missing, unreadable)
    ]
    loaded = list(placement.hits[0].layers)
    assert torch.equal(torch.stack([k for k, _ in loaded]), stored.keys)
    nothing_reused = placer.place(job, MODEL, reusable=False, unreadable=set())
    assert not nothing_reused.hits and len(nothing_reused.captures) == 3
    store.close()


def test_a_replacing_plan_computes_a_stored_chunk_and_leaves_its_entry_until_stored() -> None:
    stored = make_entry(10)
    key = ChunkKey.for_chunk(MODEL, stored.token_ids)
    store = ChunkKVStore.create(1 << 20)
    store.put(key, stored)
    prompt = [0, *stored.token_ids, 7]
    plan = BlendPlan(Recipe("blend", 1.0), (ChunkSpan(1, 5),), replace_stored=True)
    job = BlendJob("r", plan, prompt, 0, len(prompt) - 1, [0])
    placer = ChunkPlacer(store, RankGroup(), ComputeRate(), 1, lambda ids: expect(stored))
    placement = placer.place(job, MODEL, reusable=True, unreadable=set())
    assert not placement.hits and [c.key for c in placement.captures] == [key]
    assert store.contains(key)  # other requests keep hitting the old entry meanwhile
    assert BlendPlan.from_params(plan.to_params()) == plan
    store.close()


def test_one_rank_agrees_with_itself() -> None:
    alone = RankGroup()
    assert alone.reports
    assert alone.all_can([True, False, True]) == [True, False, True]
    assert alone.any(True) and not alone.any(False)
    scores = torch.tensor([1.0, 2.0])
    assert torch.equal(alone.sum_heads(scores), scores)
