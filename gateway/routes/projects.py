"""``GET /v1/projects``, for admin keys (``key:project:admin``): every project, its usage since
the start (`gateway.http.project_usage`) with the bytes it stores now
(`gateway.http.project_storage`), and what it stores.

The projects listed are those the API keys name now, and any that still stores something (a
project whose keys were removed keeps its objects until deleted). Another key gets a 403: this
route reads every project, unlike the others, which only ever see the caller's.
"""

from __future__ import annotations

import asyncio
from typing import Annotated, Any

from fastapi import APIRouter, Depends

from gateway.callers import Caller
from gateway.http.errors import APIError
from gateway.http.project_storage import stored_bytes
from gateway.state import AppState, authorized, library_state

router = APIRouter()


def admin(caller: Annotated[Caller, Depends(authorized)]) -> Caller:
    if not caller.admin:
        raise APIError(
            403, "Listing projects needs an admin key ('key:project:admin').", code="forbidden"
        )
    return caller


@router.get("/v1/projects", dependencies=[Depends(admin)])
async def list_projects(state: Annotated[AppState, Depends(library_state)]) -> dict[str, Any]:
    objects = state.rag_objects
    stored = {} if objects is None else await asyncio.to_thread(objects.stored_by_project)
    names = sorted({*state.keys.projects, *stored})
    data = [
        {
            "id": name,
            "object": "project",
            "usage": state.usage.of(name).as_dict()
            | {"stored_bytes": sum(stored_bytes(stored.get(name, {})).values())},
            "stored": stored.get(name, {}),
        }
        for name in names
    ]
    return {"object": "list", "data": data}
