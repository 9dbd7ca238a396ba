"""``GET /health`` (readiness) and ``GET /metrics`` (Prometheus)."""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import JSONResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from gateway.state import CurrentState

router = APIRouter()


@router.get("/health")
async def health(state: CurrentState) -> JSONResponse:
    if state.ready:
        return JSONResponse({"status": "ready", "model": state.settings.name_for_clients})
    if state.load_error is not None:
        return JSONResponse({"status": "failed", "error": state.load_error}, status_code=503)
    status = "loading" if state.engine is None else "engine stopped"
    return JSONResponse({"status": status}, status_code=503)


@router.get("/metrics")
async def prometheus_metrics() -> Response:
    return Response(generate_latest(), media_type=CONTENT_TYPE_LATEST)
