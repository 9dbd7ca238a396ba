"""The request dependency of the OpenAI retrieval routes: a ready library and its objects."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import Body, Depends, Request

from gateway.http.errors import APIError
from gateway.state import AppState, library_state
from retriever import RagObjects


def rag_state(request: Request) -> AppState:
    state = library_state(request)
    if state.rag_objects is None:
        raise APIError(503, "Files and vector stores are unavailable; see the server log.")
    return state


def objects_of(state: AppState) -> RagObjects:
    assert state.rag_objects is not None
    return state.rag_objects


RagState = Annotated[AppState, Depends(rag_state)]
JSONBody = Annotated[Any, Body()]
"""A JSON request body, validated by the route against the ``openai`` parameter type."""
