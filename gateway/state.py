"""What the app holds while it runs, and the request dependencies that read it."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Annotated, Any

from fastapi import Depends, Request

from engine.chunk_cache import ChunkCache
from engine.runtime import Engine
from gateway.callers import Caller
from gateway.http.admission import AdmissionGate
from gateway.http.errors import APIError
from gateway.http.limits import CALLER, unauthorized
from gateway.http.project_usage import UsageBook
from gateway.http.projects import KeyRing, resolve_tenant
from gateway.http.shutdown import Shutdown
from gateway.rag.passage_index import KnownPassages
from gateway.settings import Settings
from retriever import Tenant

TENANT = "ragblend.tenant"
"""The request scope's key of its resolved `Tenant`."""

if TYPE_CHECKING:
    from gateway.rag.kv_status import KVStatusFollower
    from gateway.rag.learnt_contexts import LearntContexts
    from gateway.rag.precompute import Precomputer
    from gateway.rag.settle import PrefixSettler
    from retriever import Library, RagObjects


@dataclass
class AppState:
    settings: Settings
    gate: AdmissionGate = field(init=False)
    ingests: AdmissionGate = field(init=False)
    """Ingest requests (`/v1/documents`, `/v1/files`) in progress, admitted apart from
    generations; background chunk precompute waits while there are any."""
    keys: KeyRing = field(init=False)
    """The API keys in force and their projects (the key file's kept current)."""
    usage: UsageBook = field(default_factory=UsageBook)
    """Each project's generation requests and tokens since the start."""
    engine: Engine | None = None
    tokenizer: Any = None
    library: Library | None = None
    rag_objects: RagObjects | None = None
    """OpenAI's files, vector stores and stored responses; opened with the library."""
    chunk_cache: ChunkCache | None = None
    precomputer: Precomputer | None = None
    """Background chunk-KV precompute; None when blending is off."""
    learnt_contexts: LearntContexts | None = None
    """Contexts learnt from traffic; None unless `learn_contexts` and the engine blends."""
    settler: PrefixSettler | None = None
    """Recomputes behind the prefix what first sightings stored; None unless the engine blends."""
    kv_status: KVStatusFollower | None = None
    """Keeps document status in step with the chunk store; None when blending is off."""
    load_error: str | None = None
    engine_died: bool = False
    engine_watch: asyncio.Task[None] | None = None
    """The engine stopped while serving; the server is shutting down to exit non-zero."""
    created: int = field(default_factory=lambda: int(time.time()))
    shutdown: Shutdown = field(init=False)
    """Begun on SIGTERM; its deadline ends the generations still open."""
    passages: KnownPassages = field(init=False)
    """What ``blend.segment`` finds pasted into prompts."""

    def __post_init__(self) -> None:
        self.gate = AdmissionGate(self.settings.max_concurrent_requests)
        self.ingests = AdmissionGate(self.settings.max_concurrent_requests)
        self.keys = KeyRing(self.settings.key_callers, self.settings.api_keys_file)
        self.shutdown = Shutdown(self.settings.shutdown_timeout)
        self.passages = KnownPassages(self.settings.pasted_passages_max)

    @property
    def ready(self) -> bool:
        return self.engine is not None and self.engine.is_alive

    def ready_engine(self) -> Engine:
        """The engine, for the request path: a 503 while the model loads, after it failed to
        load or once the engine stopped."""
        if self.load_error is not None:
            raise APIError(503, f"The model failed to load: {self.load_error}")
        if self.engine is None:
            raise APIError(503, "The model is still loading; retry when /health reports ready.")
        if not self.engine.is_alive:
            raise APIError(503, "The engine has stopped; the server needs a restart.")
        return self.engine

    def ready_library(self) -> Library:
        """The document library, for the request path: a 503 while it is unavailable (not loaded
        yet, or it failed to open: serving goes on without retrieval)."""
        self.ready_engine()
        if self.library is None:
            raise APIError(503, "The document library is unavailable; see the server log.")
        return self.library

    def ready_objects(self) -> RagObjects:
        """OpenAI's files, vector stores and stored responses, for the request path: a 503 while
        they are unavailable (they open with the library)."""
        self.ready_library()
        if self.rag_objects is None:
            message = "Files, vector stores and stored responses are unavailable; see the log."
            raise APIError(503, message)
        return self.rag_objects

    @property
    def neighbour_contexts(self) -> bool:
        """Library chunks' KV is precomputed behind their neighbours."""
        return self.precomputer is not None and self.precomputer.context is not None

    def tenant(self, project: str) -> Tenant:
        """`project` with what its chunk KV keys and prefix-cache entries are salted with: its
        name, or nothing for a project that shares chunk KV (`shared_kv_projects`)."""
        return resolve_tenant(project, self.settings.shared_kv_projects)

    def model_names(self) -> set[str]:
        return {self.settings.name_for_clients, self.settings.model}


def app_state(request: Request) -> AppState:
    return request.app.state.ragblend


def authorized(request: Request) -> Caller:
    """Who the request is: the routes' own guard, resolved once a request (FastAPI caches it).
    ``RequestLimits`` already refused keyless requests before the body and left the caller."""
    caller = request.scope.get(CALLER) or app_state(request).keys.caller(request.headers.raw)
    if caller is None:
        raise unauthorized()
    return caller


def request_tenant(request: Request) -> Tenant:
    """The caller's tenant: the project whose objects the request may see and change, with its
    chunk-KV salt. Resolved once a request and kept in its scope, where the routes' dependency
    and the generation that serves them read the same value."""
    tenant = request.scope.get(TENANT)
    if tenant is None:
        tenant = app_state(request).tenant(authorized(request).project)
        request.scope[TENANT] = tenant
    return tenant


def ready_state(request: Request) -> AppState:
    state = app_state(request)
    state.ready_engine()
    return state


def check_model(requested: str, state: AppState) -> None:
    if requested not in state.model_names():
        raise APIError(
            404,
            f"The model '{requested}' does not exist; this server serves "
            f"'{state.settings.name_for_clients}'.",
            param="model",
            code="model_not_found",
        )


def library_state(request: Request) -> AppState:
    state = app_state(request)
    state.ready_library()
    return state


CurrentState = Annotated[AppState, Depends(app_state)]
RequestTenant = Annotated[Tenant, Depends(request_tenant)]
ReadyState = Annotated[AppState, Depends(ready_state)]
LibraryState = Annotated[AppState, Depends(library_state)]
