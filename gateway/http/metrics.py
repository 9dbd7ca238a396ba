"""Prometheus metrics of the gateway, exported beside vLLM's own on ``GET /metrics``."""

from __future__ import annotations

from typing import Any

from prometheus_client import Counter, Gauge, Histogram
from starlette.types import ASGIApp, Message, Receive, Scope, Send

REQUESTS = Counter(
    "ragblend_requests_total", "HTTP requests by route and status code.", ["route", "status"]
)
IN_FLIGHT = Gauge("ragblend_requests_in_flight", "Generation requests being served now.", ["route"])
TIME_TO_FIRST_TOKEN = Histogram(
    "ragblend_time_to_first_token_seconds",
    "Seconds from request arrival to the first generated token.",
    ["route"],
    buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2, 4, 8, 16, 32, 64, 128),
)
PROMPT_TOKENS = Counter("ragblend_prompt_tokens_total", "Prompt tokens processed.", ["route"])
GENERATION_TOKENS = Counter("ragblend_generation_tokens_total", "Tokens generated.", ["route"])

BLEND_REQUESTS = Counter("ragblend_blend_requests_total", "Requests with documents.", ["mode"])
BLEND_TOKENS = Counter(
    "ragblend_blend_tokens_total",
    "Prompt tokens of requests with documents, by whether their cached KV was reused.",
    ["mode", "kind"],
)
BLEND_CHUNKS = Counter(
    "ragblend_blend_chunks_total",
    "Document chunks looked up in the chunk KV store: hit, miss, or rejected (a stored entry "
    "that failed verification against its chunk; also counted as a miss).",
    ["result"],
)
BLEND_FALLBACKS = Counter(
    "ragblend_blend_fallbacks_total",
    "Blends that failed and were computed exactly instead (a full prefill of the chunks).",
)
PASTED_PASSAGES = Counter(
    "ragblend_pasted_passages_total",
    "Known passages found pasted into prompts (`blend.segment`) and placed as chunks, by where "
    "they are known from: the library, or documents sent earlier.",
    ["origin"],
)

PRECOMPUTED_CHUNKS = Counter(
    "ragblend_precomputed_chunks_total",
    "Ingested chunks whose KV was precomputed: stored now (miss) or already stored (hit).",
    ["result"],
)
CHUNK_CONTEXT_REFRESHES = Counter(
    "ragblend_chunk_context_refreshes_total",
    "Library chunks precomputed again because new chunks joined their nearest neighbours: "
    "replaced, or failed (then precomputed plainly: kept if still stored, else stored behind "
    "the fixed prefix).",
    ["result"],
)
BLEND_CHUNK_CONTEXTS = Counter(
    "ragblend_blend_chunk_contexts_total",
    "Chunks of blended requests by the context their stored KV was computed in: `cold` (behind "
    "the fixed prefix), `library` (behind library neighbours), `learnt` (behind the "
    "companions they arrived with, learnt from traffic) or `exact` (learnt behind this very "
    "prompt's head too).",
    ["context"],
)
LEARNT_CONTEXT_WORK = Counter(
    "ragblend_learnt_context_work_total",
    "Learnt-context jobs (chunks seen together, precomputed behind each other): `queued`, "
    "`done`, `failed`, or `dropped` (the queue was full).",
    ["outcome"],
)

TOOL_BLOCKS = Counter(
    "ragblend_tool_blocks_total",
    "Chat requests' tool catalogs placed as chunks, by where their KV came from: "
    "`prefix_cache` (vLLM's, the same prompt head as before), `chunk_store` (reused behind "
    "another head) or `computed`.",
    ["source"],
)
SETTLED_CHUNKS = Counter(
    "ragblend_settled_chunks_total",
    "Chunks a first sighting stored in its own context, recomputed behind the fixed prefix in "
    "the background: `queued`, `done`, `failed`, or `dropped` (the queue was full).",
    ["outcome"],
)


def record_blend(summary: dict[str, Any]) -> None:
    mode = summary["mode"]
    BLEND_REQUESTS.labels(mode).inc()
    BLEND_TOKENS.labels(mode, "reused").inc(summary["reused_tokens"])
    BLEND_TOKENS.labels(mode, "recomputed").inc(summary["recomputed_tokens"])
    BLEND_CHUNKS.labels("hit").inc(summary["chunks_hit"])
    BLEND_CHUNKS.labels("miss").inc(summary["chunks_missed"])
    if mode == "blend":
        chunks = summary["chunks_hit"] + summary["chunks_missed"]
        BLEND_CHUNK_CONTEXTS.labels(summary["context"]).inc(chunks)
    BLEND_CHUNKS.labels("rejected").inc(summary["rejected_chunks"])
    if summary["fell_back"]:
        BLEND_FALLBACKS.inc()
    if "tool_block" in summary:
        TOOL_BLOCKS.labels(summary["tool_block"]["source"]).inc()


KNOWN_ROUTES = frozenset(
    {
        "/v1/completions",
        "/v1/chat/completions",
        "/v1/models",
        "/v1/documents",
        "/v1/files",
        "/v1/vector_stores",
        "/v1/responses",
        "/v1/embeddings",
        "/v1/projects",
        "/tokenize",
        "/detokenize",
        "/version",
        "/health",
        "/metrics",
    }
)
ROUTES_WITH_ID = ("/v1/models", "/v1/documents", "/v1/files", "/v1/vector_stores", "/v1/responses")


def route_label(path: str) -> str:
    """The route of ``path``: a fixed set of labels, whatever paths clients send."""
    if path in KNOWN_ROUTES:
        return path
    for route in ROUTES_WITH_ID:
        if path.startswith(f"{route}/"):
            return f"{route}/{{id}}"
    return "other"


class RequestCounter:
    """ASGI middleware counting every HTTP response by route and status, streaming included."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        status = 500

        async def record_status(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, record_status)
        finally:
            REQUESTS.labels(route_label(scope["path"]), str(status)).inc()
