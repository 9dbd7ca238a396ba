"""``GET /health`` (readiness) and ``GET /metrics`` (Prometheus)."""

from __future__ import annotations

import asyncio

from fastapi import APIRouter
from fastapi.responses import JSONResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from gateway.http.errors import RETRY_AFTER_S
from gateway.state import CurrentState

router = APIRouter()


@router.get("/health")
async def health(state: CurrentState) -> JSONResponse:
    retry = {"Retry-After": str(RETRY_AFTER_S[503])}
    if state.shutdown.begun:
        return JSONResponse({"status": "shutting down"}, status_code=503, headers=retry)
    if state.ready:
        return JSONResponse({"status": "ready", "model": state.settings.name_for_clients})
    if state.load_error is not None:
        body = {"status": "failed", "error": state.load_error}
        return JSONResponse(body, status_code=503, headers=retry)
    status = "loading" if state.engine is None else "engine stopped"
    return JSONResponse({"status": status}, status_code=503, headers=retry)


@router.get("/metrics")
async def prometheus_metrics() -> Response:
    """ragblend's metrics and vLLM's (``vllm:*``, recorded in this process by the engine's
    Prometheus stat logger) from the one default registry.

    The gateway is one process, so this process's registry holds every value even when
    ``PROMETHEUS_MULTIPROC_DIR`` is set (prometheus_client then also writes them to files there,
    which nothing here reads). Collected on a thread: some collectors read the database.
    """
    return Response(await asyncio.to_thread(generate_latest), media_type=CONTENT_TYPE_LATEST)
