"""Worker half of a first sighting: copy each chunk vLLM just prefilled out of the paged cache.

The scheduler left the request to vLLM (:mod:`engine.connector.first_sight`); after the forward
that computed its last chunk, each chunk's K/V is read out of the request's blocks, layer by
layer, and stored as computed in its real context (keys moved to where the chunk prefix ends,
:class:`engine.connector.miss_store.MissStore`), as the blend stores a first sighting it
computes itself. Copying is a gather of rows; nothing is computed.
"""

from __future__ import annotations

import logging

import torch

from engine.connector.metadata import BlendJob
from engine.connector.miss_store import MissStore
from engine.connector.model import VllmDecoder
from engine.connector.paged_read import BlockLayout
from engine.connector.placement import Capture, Placement
from engine.kvstore.keys import ChunkKey

log = logging.getLogger(__name__)


class PagedCapture:
    def __init__(
        self,
        decoder: VllmDecoder,
        kv_caches: dict[str, torch.Tensor],
        layout: BlockLayout,
        misses: MissStore,
    ) -> None:
        self.decoder = decoder
        self.kv_caches = kv_caches
        self.layout = layout
        self.misses = misses

    @classmethod
    def create(
        cls, decoder: VllmDecoder, kv_caches: dict[str, torch.Tensor], misses: MissStore
    ) -> PagedCapture | None:
        """A capture where chunks can be copied out of this engine's paged cache and stored:
        vLLM's CPU attention (whose block layout is learnt, every layer's the same) and RoPE
        (to move keys); else None."""
        layer = decoder.attention_layer(0)
        if decoder.rope is None or type(layer.impl).__name__ != "CPUAttentionBackendImpl":
            log.info("first sightings are computed by the blend (no readable paged cache here)")
            return None
        layout = BlockLayout.learn(layer, kv_caches[layer.layer_name])
        isa = getattr(layer, "isa", "CPU")
        if layout is None:
            log.warning("first sightings are computed by the blend: vLLM's %s cache layout "
                        "cannot be read", isa)  # fmt: skip
            return None
        log.info("first sightings are prefilled by vLLM and copied out of its %s paged cache", isa)
        return cls(decoder, kv_caches, layout, misses)

    def run(self, job: BlendJob, fingerprint: str) -> Placement:
        """Store every chunk of ``job`` (``claim_end``: its last chunk's end) from its blocks;
        returns the placement stored (every chunk a capture, in prompt order)."""
        placement = Placement()
        for span in job.plan.spans:
            tokens = job.token_ids[span.start : span.end]
            key = ChunkKey.for_chunk(fingerprint, tokens, job.plan.kv_salt)
            placement.keys.append(key)
            capture = Capture(key, span.start, span.end, tokens, in_context=True)
            placement.captures.append(capture)
        block_ids = torch.tensor(job.block_ids, dtype=torch.long)
        start = job.plan.spans[0].start
        for layer in range(self.decoder.num_layers):
            cache = self.kv_caches[self.decoder.attention_layer(layer).layer_name]
            keys, values = self.layout.read_rows(cache, block_ids, start, job.claim_end)
            for capture in placement.captures:
                rows = slice(capture.start - start, capture.end - start)
                capture.keys.append(keys[rows])
                capture.values.append(values[rows])
        device = next(iter(self.kv_caches.values())).device
        self.misses.put(self.decoder, job, placement, device)
        return placement
