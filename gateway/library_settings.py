"""Settings of the document library (part of ``Settings``): when and how requests retrieve from
it, how documents are chunked, indexed, embedded and stored, and the bounds on what an ingest
request may send."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict


class LibrarySettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="RAGBLEND_", extra="ignore")

    retrieval_by_default: bool = Field(
        False,
        description="Retrieve from ingested documents when a request sends neither "
        "`documents` nor `retrieval`.",
    )
    retrieval_top_k: int = Field(
        6, ge=1, le=64, description="Chunks retrieved when a request does not say (`top_k`)."
    )
    retrieval_ranking: Literal["dense", "hybrid"] = Field(
        "dense",
        description="How searches rank chunks when a request does not say: by embedding "
        "similarity, or that fused with keyword (full-text) matches by reciprocal rank.",
    )
    hybrid_embedding_weight: float = Field(
        1.0, ge=0, description="Weight of the embedding ranking in `hybrid` ranking."
    )
    hybrid_text_weight: float = Field(
        1.0, gt=0, description="Weight of the keyword ranking in `hybrid` ranking."
    )
    reranker: Literal["off", "served-model"] = Field(
        "off",
        description="Reranker reordering each search's best `rerank_candidates` chunks after "
        "ranking (chat `retrieval`, vector store search, `file_search`): `served-model` scores "
        "them by how likely the served model finds the question after each chunk (its weights "
        "loaded a second time, in the gateway), and its score in [0, 1] replaces the ranking's. "
        "A request's `ranking_options.ranker` `none` skips it.",
    )
    rerank_cache_mb: int = Field(
        512,
        ge=0,
        description="Memory for the reranker's cached passage KV (each chunk is read by the model "
        "once, then only questions are computed over it), least recently used out first. A "
        "384-token chunk takes 9.0 MiB on SmolLM2-135M and 5.3 MiB on Qwen2.5-0.5B, so the "
        "default holds about 57 and 97 chunks; a search over chunks not held costs seconds.",
    )
    rerank_candidates: int = Field(
        20, ge=1, le=100, description="Chunks the reranker reorders per search (at least `top_k`)."
    )
    rerank_threads: int = Field(
        1,
        ge=1,
        description="Torch threads of the reranker. It runs on the request path beside the "
        "engine's threads: on 2 cores, 1 thread reranked 20 chunks in 0.69 s idle and 0.86 s "
        "beside a busy engine, 2 threads in 0.54 s idle and 10 s busy (docs/benchmarks.md).",
    )
    chunk_tokens: int = Field(
        384, ge=64, le=2048, description="Largest ingested chunk, in the served model's tokens."
    )
    index_kind: Literal["flat", "hnsw"] = Field(
        "flat", description="FAISS index: exact inner product, or HNSW for large collections."
    )
    database_url: str | None = Field(
        None,
        pattern=r"^postgres(ql)?://",
        description="PostgreSQL holding the document library shared by replicas "
        "(`postgresql://user@host:5432/ragblend`); unset: a SQLite file under the data dir.",
    )
    embedding_model: Path | None = Field(
        None, description="Local sentence-transformers model; default: bundled all-MiniLM-L6-v2."
    )
    embedding_dtype: Literal["auto", "float32", "bfloat16"] = Field(
        "auto",
        description="What the embedding model computes in: `auto` is bfloat16 on a CPU with "
        "native bfloat16 (AVX512-BF16 or AMX; about twice the ingest speed, embeddings within "
        "a cosine of 0.998), float32 elsewhere.",
    )
    max_document_bytes: int = Field(
        10 * 1024 * 1024, ge=1, description="Largest document accepted for ingest (else 413)."
    )
    max_ingest_request_bytes: int = Field(
        20 * 1024 * 1024,
        ge=1,
        description="Largest `POST /v1/documents` body, JSON or all uploaded files together, "
        "and largest `POST /v1/files` upload (else 413, decided while reading).",
    )
    max_documents_per_request: int = Field(
        256, ge=1, description="Most documents (JSON) or files (multipart) per ingest request."
    )
    extract_timeout: float = Field(
        30.0,
        gt=0,
        description="Seconds reading the text of one uploaded HTML or PDF file may take; the "
        "extraction runs in a child process, killed after that (422).",
    )
    extract_max_expansion: float = Field(
        10.0,
        gt=0,
        description="Text extracted from an upload may be at most this many times the file's "
        "size, and at most `max_document_bytes` (else 413).",
    )
