"""Chunk KV salted by project: a chunk one project stored is a miss for another unless both share
chunk KV; the salt reaches the worker's keys, its evictions and vLLM's prefix-cache salt."""

from __future__ import annotations

from engine.connector.metadata import BlendJob
from engine.connector.placement import ChunkPlacer
from engine.connector.ranks import RankGroup
from engine.contract import BlendPlan, ChunkSpan, Recipe, eviction_params, evictions_in
from engine.kvstore.keys import ChunkKey
from engine.kvstore.load_meter import ComputeRate
from engine.kvstore.store import ChunkKVStore
from gateway.http.projects import resolve_tenant
from gateway.settings import Settings
from tests.unit.kv_entries import expect, make_entry

MODEL = "test-model"
TOKENS = [5, 6, 7, 8]


def test_a_salt_gives_the_same_tokens_another_key_and_no_salt_the_old_one() -> None:
    plain = ChunkKey.for_chunk(MODEL, TOKENS)
    assert ChunkKey.for_chunk(MODEL, TOKENS, "") == plain
    salted = {salt: ChunkKey.for_chunk(MODEL, TOKENS, salt) for salt in ("alpha", "beta")}
    assert len({plain, *salted.values()}) == 3
    assert ChunkKey.for_chunk(MODEL, TOKENS, "alpha") == salted["alpha"]


def test_projects_are_salted_by_name_unless_they_share() -> None:
    settings = Settings(model="m", shared_kv_projects="public, docs")
    assert settings.shared_kv_projects == ["public", "docs"]
    assert resolve_tenant("alpha", settings.shared_kv_projects).kv_salt == "alpha"
    assert resolve_tenant("docs", settings.shared_kv_projects).kv_salt == ""
    assert Settings(model="m").shared_kv_projects == ["default"]  # a lone server keeps its keys


def test_the_plan_carries_the_salt_to_the_worker_and_into_the_prefix_cache_salt() -> None:
    spans = (ChunkSpan(1, 5),)
    plan = BlendPlan(Recipe("blend", 0.2), spans, kv_salt="alpha")
    decoded = BlendPlan.from_params(plan.to_params())
    assert decoded is not None and decoded.kv_salt == "alpha"
    unsalted = BlendPlan(Recipe("blend", 0.2), spans)
    assert plan.cache_salt != unsalted.cache_salt and "alpha" in (plan.cache_salt or "")
    assert BlendPlan(Recipe("full", 0.0), spans, kv_salt="alpha").cache_salt == "alpha"
    assert BlendPlan(Recipe("full", 0.0), spans).cache_salt is None
    assert evictions_in(eviction_params([TOKENS], "alpha")) == [("alpha", TOKENS)]


def test_a_chunk_stored_for_one_project_is_a_miss_for_another_and_a_hit_for_itself() -> None:
    entry = make_entry(10)
    store = ChunkKVStore.create(1 << 20)
    store.put(ChunkKey.for_chunk(MODEL, entry.token_ids, "alpha"), entry)
    prompt = [0, *entry.token_ids, 7]
    placer = ChunkPlacer(store, RankGroup(), ComputeRate(), 1, lambda ids: expect(entry))

    def hits(salt: str) -> int:
        plan = BlendPlan(Recipe("blend", 0.2), (ChunkSpan(1, 5),), kv_salt=salt)
        job = BlendJob("r", plan, prompt, 0, len(prompt) - 1, [0])
        placement = placer.place(job, MODEL, reusable=True, unreadable=set())
        for hit in placement.hits:
            list(hit.layers)  # drain the stream
        return len(placement.hits)

    assert (hits("alpha"), hits("beta"), hits("")) == (1, 0, 0)
    store.close()
