"""Load the model and the services around it, in the background while ``/health`` answers.

What each service is built from the settings (the engine's options, the chunk cache, the
library, the learnt contexts) and the order they start in; `gateway.app` only starts `load`.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
from functools import partial
from pathlib import Path
from typing import Any

from engine.chunk_cache import ChunkCache
from engine.contract import BlendSettings, BlendStats, StoreEvictions
from engine.model_records import shared_root
from engine.models.provision import resolve_model
from engine.options import EngineOptions
from engine.platform import resolve_device, resolve_dtype
from engine.runtime import Engine
from gateway.http.engine_watch import exit_after_engine_death, wait_for_engine_death
from gateway.http.library_metrics import LIBRARY_PROGRESS
from gateway.http.startup_heap import freeze_loaded_heap
from gateway.http.store_metrics import CHUNK_STORE
from gateway.rag.chunk_context import NeighbourContext
from gateway.rag.chunked_prompt import chunk_prefix
from gateway.rag.kv_status import KVStatusFollower
from gateway.rag.learnt_contexts import LearntContexts
from gateway.rag.precompute import Precomputer
from gateway.rag.settle import PrefixSettler
from gateway.settings import Settings
from gateway.state import AppState
from retriever import STORE_FILE, Library, NeighbourPolicy, RagObjects, Reranker

log = logging.getLogger(__name__)

GIB = 1 << 30


def blend_settings(settings: Settings, tokenizer: Any) -> BlendSettings | None:
    if not settings.blend_enabled:
        return None
    secret = settings.chunk_cache_secret
    return BlendSettings(
        model_name=settings.name_for_clients,
        chunk_kv_dir=str(settings.chunk_kv_dir),
        memory_bytes=int(settings.chunk_cache_memory_gib * GIB),
        disk_bytes=int(settings.chunk_cache_disk_gib * GIB),
        chunk_prefix=tuple(chunk_prefix(tokenizer, settings.chunk_prefix)),
        redis_url=settings.chunk_cache_redis_url,
        redis_timeout_s=settings.chunk_cache_redis_timeout,
        recompute_when_faster=settings.chunk_cache_recompute_when_faster,
        slow_tier_format=settings.chunk_cache_format,
        shared_secret_hex=secret.get_secret_value() if secret else "",
    )


def engine_options(settings: Settings, model_dir: Path, tokenizer: Any) -> EngineOptions:
    device = resolve_device(settings.device)
    return EngineOptions(
        model_dir=model_dir,
        device=device,
        cache_dir=settings.vllm_cache_dir,
        shared_records_dir=shared_root(settings.models_dir),
        max_model_len=settings.max_model_len,
        dtype=resolve_dtype(settings.dtype, device),
        kv_cache_gib=settings.kv_cache_gib,
        gpu_memory_utilization=settings.gpu_memory_utilization,
        enable_prefix_caching=settings.enable_prefix_caching,
        max_num_seqs=settings.max_num_seqs,
        max_num_batched_tokens=settings.max_num_batched_tokens,
        cpu_compile=settings.cpu_compile,
        tensor_parallel_size=settings.tensor_parallel_size,
        cpu_reserved_cores=settings.cpu_reserved_cores,
        blend=blend_settings(settings, tokenizer),
        log_level=settings.log_level,
        served_model_name=settings.name_for_clients,
    )


def chunk_cache(settings: Settings, engine: Engine, tokenizer: Any) -> ChunkCache:
    """Behind `passages` the neutral passages after the prompt's head are what a neighbour
    context takes the place of."""
    prefix = chunk_prefix(tokenizer, settings.chunk_prefix)
    if settings.chunk_prefix != "passages":
        return ChunkCache(engine, prefix)
    return ChunkCache(engine, prefix, head_len=len(chunk_prefix(tokenizer, "chat")))


def neighbour_policy(settings: Settings, cache: ChunkCache) -> NeighbourPolicy | None:
    """How library chunks' KV is computed behind their neighbours, in the window of the neutral
    passages; None: behind the fixed prefix alone (no neighbour contexts, or no blending)."""
    if settings.chunk_context != "neighbours" or not cache.engine.blending:
        return None
    return NeighbourPolicy(settings.chunk_context_neighbours, len(cache.prefix) - cache.head_len)


def learnt_contexts(state: AppState, cache: ChunkCache) -> LearntContexts:
    """Learning waits while requests are served (`background_quiet_s`)."""
    settings = state.settings
    return LearntContexts(
        cache,
        partial(state.gate.busy, settings.background_quiet_s),
        settings.learn_contexts_after,
        settings.learn_contexts_capacity,
        settings.learn_contexts_queue,
    )


def reranker(settings: Settings, model_dir: Path) -> Reranker | None:
    """The reranker ``RAGBLEND_RERANKER`` names, loaded: the served model's weights, read on
    this process's CPU (`retriever.search.query_likelihood`); None when it is off."""
    if settings.reranker == "off":
        return None
    from retriever import QueryLikelihoodReranker

    dtype = resolve_dtype(settings.dtype, "cpu")
    cache_bytes = settings.rerank_cache_mb * 1024 * 1024
    return QueryLikelihoodReranker.load(model_dir, cache_bytes, dtype, settings.rerank_threads)


async def _open_library(
    settings: Settings,
    tokenizer: Any,
    neighbours: NeighbourPolicy | None,
    ranker: Reranker | None,
) -> Library | None:
    """The document library, or None (retrieval off, serving on) if it cannot be opened."""
    from retriever import Embedder

    def open_library() -> Library:
        embedder = Embedder(settings.embedding_model, dtype=settings.embedding_dtype)
        return Library(
            settings.library_dir,
            tokenizer,
            embedder,
            settings.index_kind,
            settings.chunk_tokens,
            settings.database_url,
            neighbours,
            ranker,
            settings.rerank_candidates,
        )

    try:
        return await asyncio.to_thread(open_library)
    except Exception:
        log.exception("the document library could not be opened; retrieval is off")
        return None


async def load(state: AppState, exit_on_failure: bool) -> None:
    """Load the model, then the library and the background services; a failure is kept in
    ``state.load_error`` (every generation request then answers 503) or, with
    ``exit_on_failure``, stops the server."""
    from transformers import AutoTokenizer

    try:
        settings = state.settings
        model_dir = await asyncio.to_thread(resolve_model, settings.model, settings.models_dir)
        tokenizer = await asyncio.to_thread(AutoTokenizer.from_pretrained, model_dir)
        options = engine_options(settings, model_dir, tokenizer)
        engine = await asyncio.to_thread(Engine, options)
        state.chunk_cache = chunk_cache(settings, engine, tokenizer)
        neighbours = neighbour_policy(settings, state.chunk_cache)
        # A reranker asked for but not loadable stops loading: requests naming it must not
        # be served unreranked.
        ranker = await asyncio.to_thread(reranker, settings, model_dir)
        state.library = await _open_library(settings, tokenizer, neighbours, ranker)
        if state.library is not None:
            LIBRARY_PROGRESS.store = state.library.store
        if state.library is not None:
            # OpenAI's files, vector stores and responses: beside the library's documents.
            objects_path = state.library.data_dir / STORE_FILE
            state.rag_objects = await asyncio.to_thread(
                RagObjects, objects_path, settings.database_url
            )
        if state.library is not None and engine.blending:
            context = None
            if neighbours is not None:
                context = NeighbourContext(state.library, tokenizer, neighbours.count)
            state.precomputer = Precomputer(
                state.library,
                state.chunk_cache,
                context,
                state.tenant,
                partial(state.ingests.busy, settings.background_quiet_s),
            )
            state.precomputer.start()
            state.kv_status = KVStatusFollower(state.library.store)
            state.kv_status.start()
        if settings.learn_contexts and engine.blending:
            state.learnt_contexts = learnt_contexts(state, state.chunk_cache)
            state.learnt_contexts.start()
        if engine.blending:
            busy = partial(state.gate.busy, settings.background_quiet_s)
            state.settler = PrefixSettler(state.chunk_cache, busy)
            state.settler.start()
        engine.stats_listener = lambda stats: _on_blend_stats(state, stats)
        engine.evictions_listener = lambda evictions: _on_store_evictions(state, evictions)
        state.engine = engine
        state.tokenizer = tokenizer
        state.engine_watch = asyncio.create_task(watch_engine(engine, state), name="engine-watch")
    except Exception as exc:
        state.load_error = f"{type(exc).__name__}: {exc}"
        log.exception("the model could not be loaded")
        if exit_on_failure:
            os.kill(os.getpid(), signal.SIGINT)
        return
    finally:
        freeze_loaded_heap()
    log.info("ready: serving %s on %s", state.settings.name_for_clients, options.device)


def _on_blend_stats(state: AppState, stats: BlendStats) -> None:
    if state.kv_status is not None:
        state.kv_status.observe(stats.chunk_keys)
    _on_store_evictions(state, StoreEvictions(stats.evicted_keys, stats.store))


def _on_store_evictions(state: AppState, evictions: StoreEvictions) -> None:
    """After a request's chunks were noted present: evictions were taken after they were stored."""
    CHUNK_STORE.update(evictions.store)
    if state.kv_status is not None:
        state.kv_status.evicted(evictions.evicted_keys)
    if state.learnt_contexts is not None:
        state.learnt_contexts.forget(evictions.evicted_keys)


async def watch_engine(engine: Engine, state: AppState) -> None:
    await wait_for_engine_death(lambda: engine.is_alive)
    state.engine_died = True
    exit_after_engine_death()
