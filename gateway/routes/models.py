"""``GET /v1/models`` and ``GET /v1/models/{id}``."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends

from gateway.state import AppState, CurrentState, authorized, check_model

router = APIRouter(dependencies=[Depends(authorized)])


def _card(state: AppState) -> dict[str, Any]:
    return {
        "id": state.settings.name_for_clients,
        "object": "model",
        "created": state.created,
        "owned_by": "ragblend",
        "max_model_len": state.settings.max_model_len,
        "ready": state.ready,
    }


@router.get("/v1/models")
async def list_models(state: CurrentState) -> dict[str, Any]:
    return {"object": "list", "data": [_card(state)]}


@router.get("/v1/models/{model_id:path}")
async def get_model(model_id: str, state: CurrentState) -> dict[str, Any]:
    check_model(model_id, state)
    return _card(state)
