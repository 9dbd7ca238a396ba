"""Neighbour contexts: which chunks stand before a library chunk, and which stored chunks are
precomputed again when new ones join their nearest neighbours (SQLite library, chunks embedded
by hand at angles on a circle: `tests.unit.angle_embedder`).
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from pydantic import ValidationError

from engine.contract import Recipe
from gateway.rag.chunk_context import NeighbourContext
from gateway.rag.chunked_prompt import chunk_separator
from gateway.settings import Settings
from retriever import EVERY_PROJECT
from retriever.library.facade import Library
from retriever.search.index import VectorIndex
from retriever.search.neighbours import (
    NeighbourPolicy,
    context_order,
    joined_neighbourhoods,
    nearest_chunks,
    within_window,
)
from tests.unit.angle_embedder import AngleEmbedder, note, unit_vector
from tests.unit.tenants import DEFAULT

TOKENIZER_DIR = Path(__file__).resolve().parents[2] / "data" / "models" / "smollm2-135m-instruct"
K = 2
WIDE = NeighbourPolicy(K, window_tokens=10_000)
"""A context window wider than any neighbours here: every joined chunk matters."""


@pytest.fixture(scope="module")
def tokenizer():
    if not (TOKENIZER_DIR / "tokenizer.json").exists():
        pytest.skip(f"no tokenizer at {TOKENIZER_DIR}")
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(TOKENIZER_DIR)


@pytest.fixture
def open_library(tmp_path, tokenizer):
    opened: list[Library] = []

    def open_(neighbours: NeighbourPolicy | None = WIDE) -> Library:
        library = Library(tmp_path / "library", tokenizer, AngleEmbedder(), neighbours=neighbours)
        opened.append(library)
        return library

    yield open_
    for library in opened:
        library.close()


def chunk_of(library: Library, degrees: int) -> int:
    (chunk_id,) = library.store.chunk_ids([f"d{degrees}"], project=EVERY_PROJECT)
    return chunk_id


def cache_everything(library: Library) -> None:
    """What the precompute does for each chunk, without an engine."""
    while rows := library.store.claim_pending_chunks(10):
        for row in rows:
            library.store.mark_chunk_cached(row.id, f"key-{row.id}")


def stale_notes(library: Library) -> list[str]:
    stale = [row for row in library.store.claim_pending_chunks(100) if row.kv_cached]
    return sorted(row.document_id for row in stale)


def test_a_chunks_context_is_its_nearest_others_most_similar_last(open_library, tokenizer):
    library = open_library()
    library.ingest([note(degrees) for degrees in (0, 30, 40, 90, 180)], tenant=DEFAULT)
    nearest = nearest_chunks(library.index, chunk_of(library, 30), K)
    assert [chunk_id for chunk_id, _ in nearest] == [chunk_of(library, 40), chunk_of(library, 0)]
    assert nearest[0][1] == pytest.approx(math.cos(math.radians(10)), abs=1e-5)
    assert context_order(nearest) == [chunk_of(library, 0), chunk_of(library, 40)]

    row = library.store.chunks_for([chunk_of(library, 30)], project=EVERY_PROJECT)[0]
    context = NeighbourContext(library, tokenizer, K).of(row, "default")
    separator = chunk_separator(tokenizer)
    assert [tokenizer.decode(ids) for ids in context] == [
        "A note at 0 degrees." + tokenizer.decode(separator),
        "A note at 40 degrees." + tokenizer.decode(separator),
    ]


def test_a_lone_chunk_or_one_not_indexed_has_no_context(open_library, tokenizer):
    library = open_library()
    library.ingest([note(10)], tenant=DEFAULT)
    row = library.store.chunks_for([chunk_of(library, 10)], project=EVERY_PROJECT)[0]
    assert NeighbourContext(library, tokenizer, K).of(row, "default") is None
    assert nearest_chunks(VectorIndex(2), row.id, K) is None


def test_chunks_whose_nearest_a_new_chunk_joins_are_precomputed_again(open_library):
    library = open_library()
    library.ingest([note(degrees) for degrees in (0, 10, 20, 30, 100)], tenant=DEFAULT)
    cache_everything(library)
    library.ingest([note(5)], tenant=DEFAULT)
    # 0 had 10 and 20, 10 had 0 and 20: 5 is nearer both. 20 keeps 10 and 30; 100 is far.
    assert stale_notes(library) == ["d0", "d10"]
    assert library.get("d0", tenant=DEFAULT).status == "cached"  # still served from its stored KV


def test_chunks_computed_behind_a_deleted_chunk_are_precomputed_again(open_library):
    library = open_library()
    library.ingest([note(degrees) for degrees in (0, 10, 20, 30, 100)], tenant=DEFAULT)
    cache_everything(library)
    deleted = library.delete("d10", tenant=DEFAULT)
    assert [row.document_id for row in deleted] == ["d10"]
    # 10 was among the two nearest of 0, 20 and 30 (not of 100: 30 and 20): its text leaves
    # their KV when they are computed again.
    assert stale_notes(library) == ["d0", "d20", "d30"]
    assert (
        library.get("d0", tenant=DEFAULT).status == "cached"
    )  # still served from its stored KV meanwhile


def test_a_delete_requeues_nothing_without_neighbour_contexts(open_library):
    library = open_library(neighbours=None)
    library.ingest([note(0), note(10), note(20)], tenant=DEFAULT)
    cache_everything(library)
    library.delete("d10", tenant=DEFAULT)
    assert stale_notes(library) == []


def test_new_chunks_are_not_requeued_and_a_stale_chunk_only_once(open_library):
    library = open_library()
    library.ingest([note(0), note(90)], tenant=DEFAULT)
    cache_everything(library)
    library.ingest(
        [note(10), note(11)], tenant=DEFAULT
    )  # 10 and 11 are each other's nearest: both just new
    assert stale_notes(library) == ["d0", "d90"]
    pending = [row.document_id for row in library.store.claim_pending_chunks(100)]
    assert pending == ["d10", "d11", "d0", "d90"]  # never-precomputed chunks come first
    cache_new = [chunk_of(library, 10), chunk_of(library, 11)]
    for chunk_id in cache_new:
        library.store.mark_chunk_cached(chunk_id, f"key-{chunk_id}")
    library.ingest([note(2)], tenant=DEFAULT)
    assert stale_notes(library) == ["d0", "d10", "d11", "d90"]  # 0 and 90 were already stale


def test_evicted_chunks_are_left_alone(open_library):
    library = open_library()
    library.ingest([note(0), note(40), note(80)], tenant=DEFAULT)
    cache_everything(library)
    library.store.apply_kv_presence([], [f"key-{chunk_of(library, 0)}"])
    library.ingest([note(5)], tenant=DEFAULT)
    assert stale_notes(library) == ["d40", "d80"]  # 5 joined 0's nearest too


def test_a_refreshed_chunk_is_done_and_a_failed_refresh_keeps_its_kv(open_library):
    library = open_library()
    library.ingest([note(0), note(40), note(80)], tenant=DEFAULT)
    cache_everything(library)
    library.ingest([note(5)], tenant=DEFAULT)
    library.store.mark_chunk_cached(chunk_of(library, 5), "key-new")
    assert stale_notes(library) == ["d0", "d40", "d80"]
    library.store.mark_chunk_cached(chunk_of(library, 0), f"key-{chunk_of(library, 0)}")
    library.store.cancel_requeue(chunk_of(library, 40))
    assert stale_notes(library) == ["d80"]
    library.store.cancel_requeue(chunk_of(library, 80))
    assert library.store.claim_pending_chunks(100) == []
    assert [library.get(f"d{degrees}", tenant=DEFAULT).status for degrees in (0, 5, 40, 80)] == [
        "cached"
    ] * 4


def test_with_the_fixed_prefix_nothing_is_requeued(open_library):
    library = open_library(neighbours=None)
    library.ingest([note(0), note(40)], tenant=DEFAULT)
    cache_everything(library)
    library.ingest([note(5)], tenant=DEFAULT)
    assert stale_notes(library) == []


@pytest.mark.parametrize("kind", ["flat", "hnsw"])
def test_the_rule_on_a_bare_index(kind):
    index = VectorIndex(2, kind)
    angles = {1: 0, 2: 10, 3: 20, 4: 30, 5: 100, 6: 5}
    index.add(angles, np.array([unit_vector(angle) for angle in angles.values()], np.float32))
    assert joined_neighbourhoods(index, [6], K) == {1: [], 2: []}  # 5 is nearest to 0 and 10
    # With three: 30 had 20, 10 and 0, and 5 is nearer than 0; 100 had 30, 20 and 10.
    joined = joined_neighbourhoods(index, [6], 3)
    assert {chunk: sorted(nearer) for chunk, nearer in joined.items()} == {
        1: [],
        2: [],
        3: [2, 4],  # 10 and 30 are equally near 20
        4: [2, 3],
    }


def test_a_new_neighbour_matters_while_the_nearer_ones_leave_room_in_the_window():
    joined = {1: [], 2: [10], 3: [10, 11]}
    lengths = {10: 100, 11: 200}
    assert within_window(joined, lengths, 250) == {1, 2}
    assert within_window(joined, lengths, 301) == {1, 2, 3}
    assert within_window(joined, lengths, 100) == {1}


@pytest.mark.parametrize(("window", "stale"), [(10_000, ["d0", "d100", "d20"]), (5, ["d0", "d20"])])
def test_a_chunk_is_refreshed_only_if_its_new_neighbour_fits_its_window(
    open_library, window, stale
):
    library = open_library(NeighbourPolicy(K, window))
    library.ingest([note(0), note(20), note(100)], tenant=DEFAULT)
    cache_everything(library)
    library.ingest([note(15)], tenant=DEFAULT)
    # 15 is nearest to 0 and 20; for 100 it stands behind 20 (seven tokens), out of 5.
    assert stale_notes(library) == stale


def test_neighbour_contexts_take_the_place_of_the_neutral_passages():
    assert Settings().chunk_context == "neighbours"
    assert Settings().chunk_context_neighbours == 3
    with pytest.raises(ValidationError, match="chunk_prefix=passages"):
        Settings(chunk_context="neighbours", chunk_prefix="chat")
    # Left unset, another prefix has nothing to replace: library chunks stand behind it alone.
    assert Settings(chunk_prefix="chat").chunk_context == "passages"


def test_requests_take_the_recipe_of_their_chunks_context(monkeypatch: pytest.MonkeyPatch):
    settings = Settings()
    assert _ratio_and_metric(settings.blend_recipe(in_context=True)) == (0.15, "probe")
    assert _ratio_and_metric(settings.blend_recipe(in_context=False)) == (0.55, "probe")
    monkeypatch.setenv("RAGBLEND_BLEND_IN_CONTEXT_RATIO", "0.2")
    monkeypatch.setenv("RAGBLEND_BLEND_IN_CONTEXT_METRIC", "qv")
    monkeypatch.setenv("RAGBLEND_BLEND_RECOMPUTE_RATIO", "0.5")
    monkeypatch.setenv("RAGBLEND_BLEND_METRIC", "v")
    assert _ratio_and_metric(Settings().blend_recipe(in_context=True)) == (0.2, "qv")
    assert _ratio_and_metric(Settings().blend_recipe(in_context=False)) == (0.5, "v")
    monkeypatch.setenv("RAGBLEND_BLEND_IN_CONTEXT_METRIC", "q")
    with pytest.raises(ValidationError, match="blend_in_context_metric"):
        Settings()


def _ratio_and_metric(recipe: Recipe) -> tuple[float, str]:
    return recipe.recompute_ratio, recipe.metric
