"""Build the FastAPI app: middleware, routes, and the lifespan that loads the engine in the
background (`gateway.loading`, so `/health` answers at once) and stops every service."""

from __future__ import annotations

import asyncio
import logging
import signal
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI

from gateway.http.errors import ContainUnexpectedErrors, install_error_handlers
from gateway.http.library_metrics import LIBRARY_PROGRESS
from gateway.http.limits import RequestLimits
from gateway.http.metrics import RequestCounter
from gateway.http.project_storage import PROJECT_STORAGE
from gateway.http.shutdown import CloseConnectionsWhenStopping
from gateway.loading import load
from gateway.routes import (
    chat,
    completions,
    documents,
    embeddings,
    files,
    health,
    models,
    projects,
    responses,
    tokenize,
    vector_store_files,
    vector_stores,
    version,
)
from gateway.settings import Settings
from gateway.state import AppState

log = logging.getLogger(__name__)

GIB = 1 << 30


def create_app(settings: Settings, *, exit_on_load_failure: bool = False) -> FastAPI:
    state = AppState(settings)

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        loading = asyncio.create_task(load(state, exit_on_load_failure))
        rereads_keys = _reread_keys_on_sighup(state)
        try:
            yield
        finally:
            if rereads_keys:
                asyncio.get_running_loop().remove_signal_handler(signal.SIGHUP)
            if not loading.done():
                log.warning("shutting down while the model is still loading")
            if state.engine_watch is not None:
                state.engine_watch.cancel()
            background = (state.precomputer, state.learnt_contexts, state.settler, state.kv_status)
            for service in background:
                if service is not None:
                    await service.stop()
            if PROJECT_STORAGE.state is state:
                PROJECT_STORAGE.state = None
            if state.rag_objects is not None:
                state.rag_objects.close()
            if state.library is not None:
                LIBRARY_PROGRESS.store = None
                state.library.close()
            if state.engine is not None:
                state.engine.shutdown()

    app = FastAPI(title="ragblend", version="0.1.0", lifespan=lifespan)
    app.state.ragblend = state
    PROJECT_STORAGE.state = state
    app.add_middleware(RequestLimits, settings=settings, keys=state.keys)
    app.add_middleware(ContainUnexpectedErrors)
    app.add_middleware(RequestCounter)
    app.add_middleware(CloseConnectionsWhenStopping, shutdown=state.shutdown)
    install_error_handlers(app)
    openai_routes = (files, vector_stores, vector_store_files, responses)
    vllm_routes = (embeddings, tokenize, version)
    routes = (completions, chat, documents, *openai_routes, *vllm_routes, models, projects, health)
    for module in routes:
        app.include_router(module.router)
    return app


def _reread_keys_on_sighup(state: AppState) -> bool:
    """SIGHUP reads the key file again; whether the handler is installed (only with a key file,
    and only where signals reach this loop: not in an app run off the main thread)."""
    if state.settings.api_keys_file is None:
        return False
    try:
        asyncio.get_running_loop().add_signal_handler(signal.SIGHUP, state.keys.reload)
    except (RuntimeError, ValueError):
        log.warning("SIGHUP will not reload the API keys here; they reload when the file changes")
        return False
    return True
