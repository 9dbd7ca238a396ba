"""The request dependencies of the OpenAI retrieval routes: a ready library, and the objects of
the caller's project."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import Body, Depends, Request

from gateway.state import AppState, RequestTenant, app_state
from retriever import RagObjects, Tenant


def rag_state(request: Request) -> AppState:
    state = app_state(request)
    state.ready_objects()
    return state


RagState = Annotated[AppState, Depends(rag_state)]


def objects_of(state: AppState, tenant: Tenant) -> RagObjects:
    """`tenant`'s files, vector stores and stored responses."""
    return state.ready_objects().in_project(tenant)


def project_objects(state: RagState, tenant: RequestTenant) -> RagObjects:
    """The caller's project's objects: another project's ids are unknown through them."""
    return objects_of(state, tenant)


ProjectObjects = Annotated[RagObjects, Depends(project_objects)]
JSONBody = Annotated[Any, Body()]
"""A JSON request body, validated by the route against the ``openai`` parameter type."""
