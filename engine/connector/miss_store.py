"""Worker side, after a job's fill: store each chunk it missed.

A missed chunk is mostly stored as the fill computed it (`BlendJob.kept_as_computed`): exactly,
in its real context, when nothing before it was reused (every chunk of a first sighting);
over the reused chunks' KV otherwise, which the front end later recomputes behind the fixed
prefix off the request's path; and behind chosen text for a contextual precompute or learning
request. What the fill did not capture (a plan that stores behind context missing a chunk after
a reused one, a model without RoPE, a chunk inside vLLM's prefix hit) is computed again here
right after the fixed chunk prefix, against the prefix's KV, which is computed once at the
first such miss and kept (every rank of a split model keeps its own heads). An entry's keys
always sit where the prefix ends: a chunk computed elsewhere has its keys moved there (RoPE
attention depends only on relative positions, so that is the KV the same context would give
it there).
"""

from __future__ import annotations

import torch
from torch import Tensor

from engine.blend.behind import PrefixKV, compute_prefix, prefill_behind
from engine.blend.fuse import LayerHooks, Prompt, blend_prefill
from engine.blend.rope import rotate, rotation
from engine.connector.metadata import BlendJob
from engine.connector.model import VllmDecoder
from engine.connector.placement import Capture, Placement
from engine.contract import Recipe
from engine.kvstore.entry import ChunkKV
from engine.kvstore.store import ChunkKVStore


class MissStore:
    def __init__(self, store: ChunkKVStore, chunk_prefix: tuple[int, ...]) -> None:
        self.store = store
        self.prefix = list(chunk_prefix)
        self._prefix_kv: PrefixKV | None = None

    def put(
        self, decoder: VllmDecoder, job: BlendJob, placement: Placement, device: torch.device
    ) -> None:
        """Runs on every rank after the job's paged cache is filled; computes what the fill did
        not capture (the same chunks on every rank, so the forward's collectives pair up)."""
        captures, first_reused = placement.captures, placement.first_reused
        behind_prefix = []
        for capture in captures:
            if capture.keys:
                continue
            context = job.token_ids[: capture.start]
            right_behind = job.right_behind(self.prefix, capture.start, first_reused)
            if right_behind and context != self.prefix:
                self._compute_behind(decoder, capture, context, device)  # a contextual precompute
            else:
                behind_prefix.append(capture)
        if behind_prefix:
            self._compute_behind_prefix(decoder, behind_prefix, device)
        for capture in captures:
            entry = self._at_prefix_end(decoder, capture) if capture.in_context else capture.entry()
            self.store.put(capture.key, entry, replace=job.plan.replace_stored)

    def _at_prefix_end(self, decoder: VllmDecoder, capture: Capture) -> ChunkKV:
        """A chunk computed where it stands in the job's prompt, its keys moved to where the
        prefix ends (those computed behind the prefix are there already)."""
        entry = capture.entry()
        shift = len(self.prefix) - capture.start
        if shift == 0:
            return entry
        if decoder.rope is None:
            raise ValueError("a chunk computed behind other context needs RoPE to be moved")
        move = rotation(shift, decoder.rope, entry.keys.device)
        # every layer moves alike: one rotation over all of them (per layer, the calls' own
        # overhead was most of a first sighting's copy-out on the CPU)
        keys = rotate(entry.keys.flatten(0, 1), move).view_as(entry.keys)
        return ChunkKV(keys, entry.values, entry.token_ids)

    def _compute_behind_prefix(
        self, decoder: VllmDecoder, captures: list[Capture], device: torch.device
    ) -> None:
        def keep(chunk: int, _layer: int, keys: Tensor, values: Tensor) -> None:
            captures[chunk].keys.append(keys.cpu())
            captures[chunk].values.append(values.cpu())

        chunks = [torch.tensor(capture.token_ids, device=device) for capture in captures]
        prefill_behind(decoder, self._kept_prefix(decoder, device), chunks, keep)

    def _compute_behind(
        self, decoder: VllmDecoder, capture: Capture, context: list[int], device: torch.device
    ) -> None:
        ids = torch.tensor(context + capture.token_ids, device=device)

        capture.in_context = True

        def keep(_layer: int, keys: Tensor, values: Tensor) -> None:
            capture.keys.append(keys[len(context) :].cpu())
            capture.values.append(values[len(context) :].cpu())

        blend_prefill(decoder, Prompt(ids), None, Recipe.exact(), LayerHooks(keep))

    def _kept_prefix(self, decoder: VllmDecoder, device: torch.device) -> PrefixKV:
        if self._prefix_kv is None:
            ids = torch.tensor(self.prefix, device=device)
            self._prefix_kv = compute_prefix(decoder, ids)
        return self._prefix_kv
