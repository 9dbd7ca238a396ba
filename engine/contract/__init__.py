"""The one contract between the gateway and the engine's blending connector.

Everything that crosses from a client request to the connector's worker, and back, has one
shape defined here: the blend plan (chunk spans and the resolved ``Recipe``) that rides to the
engine in ``kv_transfer_params``, the chunk evictions that ride the same way, and the typed
statistics the worker reports for each blended request and for its store's evictions between
requests. The gateway, the precompute client and
the benchmarks import this module; the connector decodes what it receives with the same
functions that encoded it. Nothing here imports vLLM or torch.
"""

from engine.contract.plan import BlendPlan, ChunkSpan, Eviction, eviction_params, evictions_in
from engine.contract.recipe import Recipe
from engine.contract.settings import BlendSettings, shared_secret
from engine.contract.stats import BlendStats, StoreEvictions
from engine.contract.types import (
    DEFAULT_BUDGET_MASS,
    DEFAULT_CHECK_LAYERS,
    DEFAULT_CHUNK_HEAD_TOKENS,
    DEFAULT_METRIC,
    DEFAULT_MODE,
    DEFAULT_QUESTION_POOL,
    DEFAULT_RECOMPUTE_RATIO,
    DEVIATION_METRICS,
    EVICT_KEY,
    METRICS,
    MODES,
    PLAN_KEY,
    QUESTION_METRICS,
    CheckLayers,
    Metric,
    Mode,
    parse_check_layer_pairs,
    parse_check_layers,
)

__all__ = [
    "DEFAULT_BUDGET_MASS",
    "DEFAULT_CHECK_LAYERS",
    "DEFAULT_CHUNK_HEAD_TOKENS",
    "DEFAULT_METRIC",
    "DEFAULT_MODE",
    "DEFAULT_QUESTION_POOL",
    "DEFAULT_RECOMPUTE_RATIO",
    "DEVIATION_METRICS",
    "EVICT_KEY",
    "METRICS",
    "MODES",
    "PLAN_KEY",
    "QUESTION_METRICS",
    "BlendPlan",
    "BlendSettings",
    "BlendStats",
    "CheckLayers",
    "ChunkSpan",
    "Eviction",
    "Metric",
    "Mode",
    "Recipe",
    "StoreEvictions",
    "eviction_params",
    "evictions_in",
    "parse_check_layer_pairs",
    "parse_check_layers",
    "shared_secret",
]
