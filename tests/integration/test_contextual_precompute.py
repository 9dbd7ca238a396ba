"""Contextual precompute on SmolLM2: a chunk computed behind its context is reused as computed.

The prompt is the chat head, then a lead of exactly the length of the prefix's neutral passages
(other documents' text, not a chunk: always computed), then one chunk, then the question. A
chunk precomputed behind that very lead sits at the same positions with the same tokens before
it, so reusing it (ratio 0) must give full prefill's answer; precomputed behind the neutral
passages it does not. ``replace`` swaps one entry for the other; without it the entry stays.
"""

from __future__ import annotations

import asyncio
import os
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from gateway.cli.selfcheck import CAPITALS, capital_document, divergence
from load_tests.engine_setup import start_engine
from tests.integration.conftest import REPO, TEST_MODEL

pytestmark = pytest.mark.integration

QUESTION = "Which city is the capital of Freedonia, and which rivers cross the country?"
CHUNK_TEXT = "The capital of Freedonia is Fredville. Two rivers, the Marr and the Osk, cross it."


@dataclass
class Reply:
    answer: str
    first_token: dict[str, float]


@dataclass
class Scenario:
    full: Reply
    replies: dict[str, Reply]
    stats: dict[str, Any]
    pair_full: Reply | None = None
    """Full prefill of the two-document prompt that ``ChunkCache.learn`` stores."""


async def _ask(setup: Any, ids: list[int], plan: Any) -> Reply:
    from vllm import SamplingParams

    params = SamplingParams(max_tokens=16, temperature=0, logprobs=10)
    request_id = uuid.uuid4().hex
    outputs = setup.engine.generate(request_id, ids, params, plan, cache_salt=request_id)
    async for output in outputs:
        completion = output.outputs[0]
    first = completion.logprobs[0]
    return Reply(completion.text, {str(t): entry.logprob for t, entry in first.items()})


async def _scenario(setup: Any) -> Scenario:
    from engine.chunk_cache import ChunkCache
    from engine.contract import BlendPlan, Recipe
    from gateway.openai.protocol import ChatMessage
    from gateway.rag.chunked_prompt import Chunks, chat_with_chunks, chunk_prefix, document_chunks

    tokenizer = setup.tokenizer
    head_len = len(chunk_prefix(tokenizer, "chat"))
    cache = ChunkCache(setup.engine, setup.prefix, head_len)
    documents = [capital_document(country, city) for country, city in CAPITALS.items()]
    other_text = [
        token for chunk in document_chunks(documents, tokenizer).token_ids for token in chunk
    ]
    lead = other_text[-(len(setup.prefix) - head_len) :]
    chunk = document_chunks([CHUNK_TEXT], tokenizer).token_ids[0]
    prompt = chat_with_chunks(
        [ChatMessage(role="user", content=QUESTION)], Chunks([lead, chunk]), tokenizer
    )
    assert prompt.spans[1].start == len(setup.prefix)  # the chunk sits where stored chunks do
    spans = (prompt.spans[1],)

    def plan(mode: str, ratio: float = 0.0) -> BlendPlan:
        return BlendPlan(Recipe().choose(mode=mode, recompute_ratio=ratio), spans)

    stats, replies = {}, {}
    full = await _ask(setup, prompt.token_ids, None)
    # Computing the prefix first: "neutral" and "neutral_again" both read it from vLLM's
    # cache. Where bf16 kernels round by batch shape (AMX), a chunk computed behind a cached
    # prefix differs from one computed in the same pass as its prefix, in vLLM's own prefill too.
    stats["warm"] = await cache.precompute(document_chunks(documents[1:2], tokenizer).token_ids[0])
    stats["neutral"] = await cache.precompute(chunk)
    replies["neutral"] = await _ask(setup, prompt.token_ids, plan("reuse"))
    stats["kept"] = await cache.precompute(chunk, context=[lead])
    replies["kept"] = await _ask(setup, prompt.token_ids, plan("reuse"))
    stats["contextual"] = await cache.precompute(chunk, context=[lead], replace=True)
    replies["contextual"] = await _ask(setup, prompt.token_ids, plan("reuse"))
    replies["contextual@1.0"] = await _ask(setup, prompt.token_ids, plan("blend", 1.0))
    stats["neutral_again"] = await cache.precompute(chunk, replace=True)
    replies["neutral_again"] = await _ask(setup, prompt.token_ids, plan("reuse"))
    # Prefix and chunk filling whole blocks: the second time vLLM's cache holds all of it.
    aligned = (other_text * 8)[: (-len(setup.prefix)) % 128 or 128]
    stats["aligned"] = await cache.precompute(aligned)
    stats["aligned_again"] = await cache.precompute(aligned, replace=True)

    # Two documents learnt as they stand right after the chat head: neither sits where
    # stored chunks do, so both entries are moved there, and moved back when reused.
    pair = document_chunks([documents[0], CHUNK_TEXT], tokenizer)
    pair_prompt = chat_with_chunks([ChatMessage(role="user", content=QUESTION)], pair, tokenizer)
    head = pair_prompt.token_ids[: pair_prompt.spans[0].start]
    assert pair_prompt.spans[0].start != len(setup.prefix)
    reuse_pair = BlendPlan(Recipe().choose(mode="reuse"), pair_prompt.spans)
    pair_full = await _ask(setup, pair_prompt.token_ids, None)
    for document in pair.token_ids:
        await cache.precompute(document, replace=True)
    replies["pair_cold"] = await _ask(setup, pair_prompt.token_ids, reuse_pair)
    stats["pair_learnt"] = await cache.learn(head, pair.token_ids, pair.separator)
    replies["pair_learnt"] = await _ask(setup, pair_prompt.token_ids, reuse_pair)
    return Scenario(full, replies, stats, pair_full)


@pytest.fixture(scope="module")
def scenario(tmp_path_factory: pytest.TempPathFactory) -> Scenario:
    models_dir = Path(os.environ.get("RAGBLEND_MODELS_DIR", REPO / "data" / "models"))
    workdir = tmp_path_factory.mktemp("contextual")
    setup = start_engine(
        TEST_MODEL, models_dir, workdir, 2048, memory_bytes=1 << 30, prefix_kind="passages"
    )
    try:
        return asyncio.run(_scenario(setup))
    finally:
        setup.engine.shutdown()


def _gap(scenario: Scenario, name: str, full: Reply | None = None) -> float:
    """How far a reply's first-token distribution is from full prefill's. The KL is taken over
    full's top tokens only, so it can come out slightly negative: its size is the distance."""
    reference = full or scenario.full
    return abs(divergence(reference.first_token, scenario.replies[name].first_token))


def test_a_chunk_precomputed_behind_its_real_context_reuses_like_full_prefill(
    scenario: Scenario,
) -> None:
    assert scenario.replies["contextual"].answer == scenario.full.answer
    assert _gap(scenario, "contextual") < 0.02
    assert _gap(scenario, "contextual") < 0.5 * _gap(scenario, "neutral")


def test_ratio_one_still_equals_full_prefill(scenario: Scenario) -> None:
    assert scenario.replies["contextual@1.0"].answer == scenario.full.answer
    assert (
        divergence(scenario.full.first_token, scenario.replies["contextual@1.0"].first_token) < 0.05
    )


def test_without_replace_the_stored_entry_stays(scenario: Scenario) -> None:
    kept = scenario.stats["kept"]
    assert (kept.chunks_hit, kept.chunks_missed) == (1, 0)
    assert scenario.replies["kept"] == scenario.replies["neutral"]


def test_replace_overwrites_the_entry_both_ways_and_reports_a_stored_chunk(
    scenario: Scenario,
) -> None:
    for name in ("neutral", "contextual", "neutral_again"):
        stats = scenario.stats[name]
        assert (stats.chunks_hit, stats.chunks_missed, stats.fell_back) == (0, 1, False), name
    assert scenario.stats["contextual"].chunk_keys == scenario.stats["neutral"].chunk_keys
    assert scenario.replies["contextual"].first_token != scenario.replies["neutral"].first_token
    again = scenario.replies["neutral_again"]
    assert again.answer == scenario.replies["neutral"].answer
    assert divergence(scenario.replies["neutral"].first_token, again.first_token) < 1e-3


def test_precomputes_behind_the_prefix_share_its_blocks_and_a_whole_hit_still_stores(
    scenario: Scenario,
) -> None:
    assert scenario.stats["warm"].prefix_cached_tokens == 0  # the first computes the prefix
    assert scenario.stats["neutral"].prefix_cached_tokens > 0
    assert scenario.stats["neutral_again"].prefix_cached_tokens > 0
    assert scenario.stats["kept"].prefix_cached_tokens == 0  # behind context: nothing shared
    for name in ("aligned", "aligned_again"):
        stats = scenario.stats[name]
        assert (stats.chunks_hit, stats.chunks_missed, stats.fell_back) == (0, 1, False), name
    assert scenario.stats["aligned_again"].chunk_keys == scenario.stats["aligned"].chunk_keys


def test_learnt_documents_reuse_like_full_prefill_wherever_they_stand(scenario: Scenario) -> None:
    full = scenario.pair_full
    assert full is not None
    learnt = scenario.stats["pair_learnt"]
    assert (learnt.chunks_hit, learnt.chunks_missed, learnt.fell_back) == (0, 2, False)
    assert scenario.replies["pair_learnt"].answer == full.answer
    assert _gap(scenario, "pair_learnt", full) < 0.02
    assert _gap(scenario, "pair_learnt", full) < 0.5 * _gap(scenario, "pair_cold", full)
