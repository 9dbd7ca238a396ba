"""The one contract between the gateway and the engine's blending connector.

Everything that crosses from a client request to the connector's worker, and back, has one
shape defined here: the blend plan (chunk spans, mode, ratio, selection overrides) that rides
to the engine in ``kv_transfer_params``, the chunk evictions that ride the same way, and the
typed statistics the worker reports for each blended request. The gateway, the precompute
client and the benchmarks import this module; the connector decodes what it receives with
the same functions that encoded it. Nothing here imports vLLM or torch.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from typing import Any, Literal, get_args

Mode = Literal["blend", "reuse", "full"]
"""``blend``: reuse chunk KV, recompute a share; ``reuse``: recompute nothing; ``full``: exact."""
MODES: tuple[Mode, ...] = get_args(Mode)

Metric = Literal["k", "v", "kv", "attn"]
"""What picks tokens to recompute: K, V or K+V deviation from the cache, or the question's
attention to each token ("attn": the question is then blended too)."""
METRICS: tuple[Metric, ...] = get_args(Metric)
DEVIATION_METRICS: tuple[Metric, ...] = ("k", "v", "kv")

CheckLayers = tuple[tuple[int, float], ...]
"""Gradual filtering: after layer L keep ``multiple x ratio`` of the cached chunk tokens."""

DEFAULT_MODE: Mode = "blend"
DEFAULT_RECOMPUTE_RATIO = 0.3
DEFAULT_CHECK_LAYERS: CheckLayers = ((1, 2.0), (2, 1.5), (3, 1.0))
DEFAULT_METRIC: Metric = "v"
DEFAULT_CHUNK_HEAD_TOKENS = 8

PLAN_KEY = "ragblend"
EVICT_KEY = "ragblend_evict"
STATS_KEY = "ragblend_stats"


@dataclass(frozen=True)
class ChunkSpan:
    """Prompt positions [start, end) holding one chunk, tokenized on its own."""

    start: int
    end: int


@dataclass(frozen=True)
class SelectionOverrides:
    """Per-request replacements for the server's selection settings (evaluations sweep these)."""

    check_layers: CheckLayers | None = None
    metric: Metric | None = None
    normalize: bool | None = None
    chunk_head_tokens: int | None = None

    def __post_init__(self) -> None:
        if self.metric is not None and self.metric not in METRICS:
            raise ValueError(f"metric must be one of {METRICS}, got {self.metric!r}")
        if self.chunk_head_tokens is not None and self.chunk_head_tokens < 0:
            raise ValueError("chunk_head_tokens must not be negative")

    def to_params(self) -> dict[str, Any]:
        return {name: value for name, value in asdict(self).items() if value is not None}

    @classmethod
    def from_params(cls, body: dict[str, Any]) -> SelectionOverrides:
        layers = body.get("check_layers")
        normalize = body.get("normalize")
        heads = body.get("chunk_head_tokens")
        return cls(
            check_layers=None if layers is None else parse_check_layer_pairs(layers),
            metric=body.get("metric"),
            normalize=None if normalize is None else bool(normalize),
            chunk_head_tokens=None if heads is None else int(heads),
        )


@dataclass(frozen=True)
class BlendPlan:
    """How one request's chunk region is filled; travels gateway -> scheduler -> worker."""

    mode: Mode
    recompute_ratio: float
    spans: tuple[ChunkSpan, ...]
    overrides: SelectionOverrides = SelectionOverrides()

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, got {self.mode!r}")
        if not 0.0 <= self.recompute_ratio <= 1.0:
            raise ValueError(f"recompute_ratio must be in [0, 1], got {self.recompute_ratio}")
        previous_end = 0
        for span in self.spans:
            if not previous_end <= span.start < span.end:
                raise ValueError("chunk spans must be non-empty, ordered and not overlap")
            previous_end = span.end

    @property
    def effective_ratio(self) -> float:
        return {"full": 1.0, "reuse": 0.0}.get(self.mode, self.recompute_ratio)

    @property
    def cache_salt(self) -> str | None:
        """Blended KV is approximate: vLLM's prefix cache shares it only with the same recipe."""
        if self.mode == "full":
            return None
        return f"ragblend:{self.mode}:{self.recompute_ratio}"

    def claim_end(self, num_prompt_tokens: int, default_metric: Metric) -> int:
        """Prompt tokens the connector computes; vLLM computes the rest, at least the last one.

        Usually the chunk region; selection by the question's attention needs the question
        blended too, so it claims all but the last prompt token.
        """
        if not self.spans or self.mode == "full":
            return 0
        metric = self.overrides.metric or default_metric
        asks_question = self.mode == "blend" and metric == "attn"
        end = num_prompt_tokens if asks_question else self.spans[-1].end
        return min(end, num_prompt_tokens - 1)

    def to_params(self) -> dict[str, Any]:
        """``kv_transfer_params`` for the engine; None-equivalent (empty) for a full prefill."""
        if self.mode == "full":
            return {}
        body = {
            "mode": self.mode,
            "recompute_ratio": self.recompute_ratio,
            "spans": [[span.start, span.end] for span in self.spans],
            "overrides": self.overrides.to_params(),
        }
        return {PLAN_KEY: body}

    def extra_args(self) -> dict[str, Any] | None:
        """``SamplingParams.extra_args`` carrying this plan to the connector; None: full."""
        params = self.to_params()
        return {"kv_transfer_params": params} if params else None

    @classmethod
    def from_params(cls, params: dict[str, Any] | None) -> BlendPlan | None:
        """Decode what ``to_params`` encoded; raises ``ValueError`` on anything malformed."""
        body = (params or {}).get(PLAN_KEY)
        if body is None:
            return None
        try:
            spans = tuple(ChunkSpan(int(start), int(end)) for start, end in body["spans"])
            overrides = SelectionOverrides.from_params(body.get("overrides") or {})
            return cls(body["mode"], float(body["recompute_ratio"]), spans, overrides)
        except (AttributeError, KeyError, TypeError) as exc:
            raise ValueError(f"malformed blend plan: {exc!r}") from exc


@dataclass(frozen=True)
class BlendStats:
    """What the worker reports for one blended request (and the response's ``blend`` object)."""

    mode: Mode
    reused_tokens: int
    recomputed_tokens: int
    chunks_hit: int
    chunks_missed: int
    prefix_cached_tokens: int
    fell_back: bool = False
    """The blend failed and the chunk region was computed exactly instead (a full prefill)."""
    rejected_chunks: int = 0
    """Stored entries that failed verification against their chunk (treated as misses)."""
    chunk_keys: tuple[str, ...] = ()
    """Chunk-store keys of the chunks now held (hits and stored misses), in prompt order."""
    evicted_keys: tuple[str, ...] = ()
    """Chunk-store keys that left the store through eviction since the worker last reported."""
    store: dict[str, int] = field(default_factory=dict)
    """The chunk store's counters and sizes when the request ran (``ChunkKVStore.stats()``)."""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def summary(self) -> dict[str, Any]:
        """What a client sees in a response's ``blend`` object: everything but the keys."""
        body = asdict(self)
        del body["chunk_keys"], body["evicted_keys"], body["store"]
        return body

    @classmethod
    def from_dict(cls, body: dict[str, Any]) -> BlendStats:
        names = {field.name for field in fields(cls)}
        kept = {key: value for key, value in body.items() if key in names}
        for name in ("chunk_keys", "evicted_keys"):
            kept[name] = tuple(kept.get(name, ()))
        return cls(**kept)

    @classmethod
    def without_blend(cls, mode: Mode, prompt_tokens: int, cached_tokens: int) -> BlendStats:
        """No chunk was blended: vLLM's prefix cache served the region, or it was a full prefill."""
        return cls(mode, 0, prompt_tokens - cached_tokens, 0, 0, cached_tokens)

    @property
    def cached_tokens(self) -> int:
        return self.reused_tokens + self.prefix_cached_tokens


@dataclass(frozen=True)
class BlendSettings:
    """The server's blending configuration, handed to the connector in vLLM's extra config."""

    model_name: str
    chunk_kv_dir: str
    """Holds the chunk store's disk tier (``store/``) and the secret keying its checksums."""
    memory_bytes: int
    disk_bytes: int | None
    """Disk tier budget; None: no limit."""
    chunk_prefix: tuple[int, ...]
    """Token ids each chunk is precomputed behind; they are not stored."""
    check_layers: CheckLayers = DEFAULT_CHECK_LAYERS
    metric: Metric = DEFAULT_METRIC
    normalize: bool = False
    chunk_head_tokens: int = DEFAULT_CHUNK_HEAD_TOKENS
    stats_channel: str = ""
    """Name of the worker -> scheduler statistics channel; the runtime sets a fresh one for
    every engine it starts, so no other process can reach or remove it."""
    redis_url: str = ""
    """The shared Redis tier of the chunk store behind memory and disk; empty: none."""
    redis_timeout_s: float = 0.5
    slow_tier_format: str = "raw"
    """How disk and Redis store chunk KV: ``raw`` (exact) or ``int8`` (half of bf16)."""
    shared_secret_hex: str = field(default="", repr=False)
    """Secret signing chunk KV, shared by the servers sharing a Redis; empty: ``secret_path``."""

    @property
    def store_dir(self) -> str:
        return f"{self.chunk_kv_dir}/store"

    @property
    def secret_path(self) -> str:
        return f"{self.chunk_kv_dir}/secret"

    def to_extra_config(self) -> dict[str, Any]:
        return {**asdict(self), "chunk_prefix": list(self.chunk_prefix)}

    @classmethod
    def from_extra_config(cls, extra: dict[str, Any]) -> BlendSettings:
        names = {field.name for field in fields(cls)}
        body = {key: value for key, value in extra.items() if key in names}
        body["chunk_prefix"] = tuple(int(token) for token in body["chunk_prefix"])
        body["check_layers"] = parse_check_layer_pairs(body["check_layers"])
        return cls(**body)


def stats_in(params: dict[str, Any] | None) -> BlendStats | None:
    """The worker's statistics in a finished request's ``kv_transfer_params``, if any."""
    body = (params or {}).get(STATS_KEY)
    return None if body is None else BlendStats.from_dict(body)


def stats_params(stats: BlendStats) -> dict[str, Any]:
    return {STATS_KEY: stats.to_dict()}


def eviction_params(chunks: list[list[int]]) -> dict[str, Any]:
    """``kv_transfer_params`` asking the worker to delete these chunks' stored KV."""
    return {EVICT_KEY: [list(chunk) for chunk in chunks]}


def evictions_in(params: dict[str, Any] | None) -> list[list[int]]:
    return [[int(token) for token in chunk] for chunk in (params or {}).get(EVICT_KEY, [])]


def parse_check_layer_pairs(pairs: Any) -> CheckLayers:
    """``[[1, 2], [2, 1.5]]`` -> ((1, 2.0), (2, 1.5)); layers ascending, multiples positive."""
    layers = tuple((int(layer), float(multiple)) for layer, multiple in pairs)
    ordered = [layer for layer, _ in layers]
    if ordered != sorted(set(ordered)) or any(layer < 0 for layer in ordered):
        raise ValueError("check layers must be distinct, ascending and non-negative")
    if any(multiple <= 0 for _, multiple in layers):
        raise ValueError("check-layer multiples must be positive")
    return layers


def parse_check_layers(text: str) -> CheckLayers:
    """``"1:2,2:1.5,3:1"`` -> ((1, 2.0), (2, 1.5), (3, 1.0))."""
    try:
        pairs = [item.split(":") for item in text.split(",") if item.strip()]
        return parse_check_layer_pairs(pairs)
    except ValueError as exc:
        raise ValueError(f"check layers must look like '1:2,2:1.5,3:1': {exc}") from exc
