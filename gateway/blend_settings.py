"""Settings of blending, of finding known passages pasted into prompts, and of what chunk KV
is precomputed behind (part of ``Settings``).

Two recipes: chunks precomputed behind the fixed prefix (sent ``documents``) need more of their
tokens recomputed than library chunks precomputed behind their neighbours, which already carry
attention to text like what they meet when served (docs/benchmarks.md, issue 15). A request
takes the recipe of its chunks' context, and its own ``blend`` options over either.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from engine.contract import (
    DEFAULT_BUDGET_MASS,
    DEFAULT_CHUNK_HEAD_TOKENS,
    DEFAULT_MODE,
    DEFAULT_QUESTION_POOL,
    Metric,
    Mode,
    Recipe,
    parse_check_layers,
)

COLD_RATIO = 0.55
COLD_METRIC: Metric = "probe"
"""The cold recipe: the lowest ratio tried at which the question probe held within 0.02 F1 of
full prefill on both the 0.5B and the 1.5B model, held-out items (docs/benchmarks.md, "Cold sent
documents"); V deviation at 0.3 lost 0.115 on the 1.5B."""


TOOLS_RATIO = 0.0
"""The tool catalog's recipe: nothing of the catalog recomputed. On BFCL's own questions its
calls were as often exactly right as a full prefill's, paired, on the 0.5B (-0.013, 95% interval
-0.055 to +0.030, the same as at 0.05 and 0.15) and the 1.5B model (+0.000 at 0 and 0.05);
docs/benchmarks.md, "Tool catalogs as chunks"."""


class BlendServerSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="RAGBLEND_", extra="ignore")

    blend_enabled: bool = Field(
        True, description="Reuse cached chunk KV at any position (CacheBlend) for `documents`."
    )
    blend_mode: Mode = Field(
        DEFAULT_MODE, description="Default `blend.mode` of requests with documents."
    )
    blend_recompute_ratio: float = Field(
        COLD_RATIO,
        ge=0,
        le=1,
        description="Default share of chunk tokens recomputed per request (chunk heads included) "
        "when its chunks stand behind the fixed prefix: sent `documents`, or library chunks "
        "without neighbour contexts.",
    )
    blend_check_layers: str = Field(
        "1:2,2:1.5,3:1",
        description="Gradual filtering: `layer:multiple` pairs; after each check layer keep "
        "multiple x ratio of the cached tokens, the most deviating ones.",
    )
    blend_metric: Metric = Field(
        COLD_METRIC,
        description="What selects tokens to recompute: deviation of keys, values or both, "
        "`attn`, the question's attention to them, `qv`, V deviation within a pool of the "
        "tokens the question attends to most, or `probe`, the question's attention over the "
        "reused cache at the first check layer before any chunk token is computed (with `attn`, "
        "`qv` and `probe` the question is blended too).",
    )
    blend_chunk_head_tokens: int = Field(
        DEFAULT_CHUNK_HEAD_TOKENS,
        ge=0,
        description="Leading tokens of every cached chunk always recomputed in blend mode.",
    )
    blend_question_pool: float = Field(
        DEFAULT_QUESTION_POOL,
        ge=1,
        description="With `qv`: the question's pool, in multiples of the tokens a check layer "
        "keeps; the most V-deviating tokens within it are kept.",
    )
    blend_budget_mass: float = Field(
        DEFAULT_BUDGET_MASS,
        gt=0,
        le=1,
        description="Adaptive budget: below 1 a check layer keeps only the fewest tokens holding "
        "this share of the candidates' total deviation, at most what the ratio allows.",
    )
    blend_in_context_ratio: float = Field(
        0.15,
        ge=0,
        le=1,
        description="Default share recomputed when every chunk of a request is a library chunk "
        "precomputed behind its neighbours (`chunk_context=neighbours`).",
    )
    blend_in_context_metric: Metric = Field(
        "probe", description="Default selection metric of those requests (see `blend_metric`)."
    )
    blend_tools_ratio: float = Field(
        TOOLS_RATIO,
        ge=0,
        le=1,
        description="Default share recomputed when a chat request's only chunk is its tool "
        "catalog (the tools the chat template writes after the system prompt), reused from a "
        "request with another system prompt.",
    )
    blend_tools_metric: Metric = Field(
        "probe", description="Default selection metric of those requests (see `blend_metric`)."
    )
    blend_segment: bool = Field(
        False,
        description="Find known passages (library chunks, documents sent before) pasted into "
        "the prompt of requests without `documents` or `retrieval` and reuse their chunk KV, as "
        "`blend.segment: true` does per request; costs a scan of each such prompt.",
    )
    pasted_passages_max: int = Field(
        100_000,
        ge=0,
        description="Sent documents remembered so that `blend.segment` finds them pasted later "
        "(about 600 bytes each; the least recently sent are forgotten first); 0: none.",
    )
    chunk_prefix: Literal["plain", "chat", "passages"] = Field(
        "passages",
        description="What chunk KV is precomputed behind: `plain` (BOS or a newline, what "
        "completion prompts start with), `chat` (the chat template's system and user head) or "
        "`passages` (the chat head, then three neutral passages: chunks meet real ones).",
    )
    chunk_context: Literal["passages", "neighbours"] = Field(
        "neighbours",
        description="What a library chunk's KV is precomputed behind: `neighbours` (its nearest "
        "other chunks in the index, most similar last, in place of the prefix's neutral "
        "passages; precomputed again when new chunks join them) or `passages` (the fixed chunk "
        "prefix alone). Sent `documents` always use the fixed prefix. `neighbours` needs "
        "`chunk_prefix=passages`; left unset, another prefix turns it to `passages`.",
    )
    chunk_context_neighbours: int = Field(
        3, ge=1, le=16, description="With `neighbours`: how many chunks stand before each one."
    )
    learn_contexts: bool = Field(
        False,
        description="Learn contexts from traffic: chunks that keep arriving together (sent "
        "`documents`, and retrieved chunks without neighbour contexts) are stored as they stand "
        "in those requests (behind the prompt's head and the chunks before them): on the spot "
        "by a request that misses them all, else precomputed in the background; later requests "
        "with the same chunks in the same order reuse them exactly behind the same head, or "
        "take the in-context recipe.",
    )
    learn_contexts_after: int = Field(
        2,
        ge=1,
        description="Sightings of the same chunks in the same order before they are learnt.",
    )
    learn_contexts_capacity: int = Field(
        4096,
        ge=1,
        description="Chunk arrangements counted, and chunks whose learnt context is recorded "
        "(each least recently seen first out).",
    )
    learn_contexts_queue: int = Field(
        64,
        ge=1,
        description="Arrangements waiting to be learnt; one more is dropped (and counted).",
    )

    @field_validator("blend_check_layers")
    @classmethod
    def _schedule_parses(cls, value: str) -> str:
        parse_check_layers(value)
        return value

    @model_validator(mode="after")
    def _neighbours_replace_passages(self) -> BlendServerSettings:
        if self.chunk_context == "neighbours" and self.chunk_prefix != "passages":
            if "chunk_context" in self.model_fields_set:
                raise ValueError("chunk_context=neighbours needs chunk_prefix=passages to replace")
            self.chunk_context = "passages"
        return self

    def blend_recipe(self, in_context: bool) -> Recipe:
        """The server's recipe for a request whose chunks all stand in neighbour contexts
        (``in_context``), or not; ``Recipe.choose`` lays a request's own options over it."""
        if in_context:
            return self._recipe(self.blend_in_context_ratio, self.blend_in_context_metric)
        return self._recipe(self.blend_recompute_ratio, self.blend_metric)

    def tool_block_recipe(self) -> Recipe:
        """The server's recipe for a request whose only chunk is its tool catalog."""
        return self._recipe(self.blend_tools_ratio, self.blend_tools_metric)

    def _recipe(self, ratio: float, metric: Metric) -> Recipe:
        return Recipe(
            self.blend_mode,
            ratio,
            metric,
            parse_check_layers(self.blend_check_layers),
            self.blend_chunk_head_tokens,
            question_pool=self.blend_question_pool,
            budget_mass=self.blend_budget_mass,
        )
