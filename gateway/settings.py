"""The one configuration surface: environment variables prefixed ``RAGBLEND_`` (the blend
settings in ``gateway.blend_settings``)."""

from __future__ import annotations

from functools import cached_property
from pathlib import Path
from typing import Annotated, Literal

from pydantic import Field, SecretStr, field_validator, model_validator
from pydantic_settings import NoDecode, SettingsConfigDict

from engine.contract import shared_secret
from gateway.blend_settings import BlendServerSettings
from gateway.http.projects import PROJECT_NAME, Caller, parse_entries
from retriever import DEFAULT_PROJECT


class Settings(BlendServerSettings):
    model_config = SettingsConfigDict(env_prefix="RAGBLEND_", extra="ignore")

    model: str = Field(
        "qwen2.5-coder-0.5b-instruct",
        description="Model to serve: a known model name or a local Hugging Face model directory.",
    )
    served_model_name: str | None = Field(
        None, description="Name clients use in `model`; defaults to the model name."
    )
    host: str = Field("127.0.0.1", description="Address the HTTP server binds.")
    port: int = Field(8000, ge=1, le=65535, description="Port the HTTP server binds.")
    data_dir: Path = Field(
        Path("data"), description="Root of everything persisted: models, vLLM cache, documents."
    )
    models_dir: Path = Field(
        Path(),
        description="Where converted models are cached; defaults to `<data_dir>/models`.",
    )
    api_keys: Annotated[list[str], NoDecode] = Field(
        default_factory=list,
        description="Comma-separated bearer tokens, each `key`, `key:project` or "
        "`key:project:admin` (a bare key is project `default`; see Projects). Empty (and no "
        "key file) disables authentication.",
    )
    api_keys_file: Path | None = Field(
        None,
        description="File of more API keys, one `key[:project[:admin]]` a line (`#` comments), "
        "read again when it changes and on SIGHUP.",
    )
    shared_kv_projects: Annotated[list[str], NoDecode] = Field(
        default_factory=lambda: [DEFAULT_PROJECT],
        description="Comma-separated projects that share chunk KV and vLLM's prefix cache with "
        "each other; every other project's cached KV is keyed with its name, so another project "
        "neither hits nor can time it. Sharing lets a project tell by speed whether another "
        "sent a text (see Projects).",
    )
    device: Literal["auto", "cpu", "cuda"] = Field(
        "auto", description="Where the engine runs; `auto` picks CUDA when a GPU is visible."
    )
    max_model_len: int = Field(
        8192, ge=256, description="Longest prompt plus completion, in tokens."
    )
    kv_cache_gib: float = Field(
        4.0, gt=0, description="CPU only: memory for vLLM's paged KV cache, in GiB."
    )
    gpu_memory_utilization: float = Field(
        0.85, gt=0, le=1, description="CUDA only: share of GPU memory vLLM may use."
    )
    dtype: Literal["auto", "bfloat16", "float16", "float32"] = Field(
        "auto",
        description="Weights and activations dtype. `auto`: bfloat16 where the hardware "
        "multiplies it (CUDA GPUs that support it, else float16; CPUs with AVX512-BF16, AMX "
        "or Arm BF16), float32 on other CPUs, where bf16 is emulated and about 5x slower.",
    )
    enable_prefix_caching: bool = Field(True, description="vLLM's own exact-prefix KV reuse.")
    max_num_seqs: int = Field(16, ge=1, description="Sequences the engine batches at once.")
    tensor_parallel_size: int = Field(
        1,
        ge=1,
        description="Processes (CPU) or GPUs that split the model; must divide its heads.",
    )
    max_concurrent_requests: int = Field(
        64, ge=1, description="Requests admitted at once; more are refused with 429."
    )
    max_tokens_default: int = Field(
        256, ge=1, description="`max_tokens` used when a request does not set it."
    )
    tool_parser: str = Field(
        "auto",
        description="vLLM tool parser that reads tool calls from answers (`tool_choice` "
        "`auto`), e.g. `hermes`, `llama3_json`, `mistral`; `auto` picks the served model's "
        "(hermes for the catalog models).",
    )
    chunk_cache_memory_gib: float = Field(
        2.0, gt=0, description="Memory tier of the chunk KV store, in GiB."
    )
    chunk_cache_disk_gib: float = Field(
        20.0, gt=0, description="Disk tier of the chunk KV store (under the data dir), in GiB."
    )
    chunk_cache_format: Literal["raw", "lossless", "int8"] = Field(
        "lossless",
        description="How the disk and Redis tiers store chunk KV: `lossless` (exact, the "
        "exponent bytes zstd-coded: 0.68x of bf16), `raw` (exact) or `int8` (8-bit K per "
        "channel and V per token: half the bytes of bf16); memory keeps it raw.",
    )
    chunk_cache_redis_url: str = Field(
        "",
        description="Redis shared by servers of the same model, a chunk KV tier behind memory "
        "and disk (`redis://host:6379/0`); empty: none. Its eviction is Redis's own "
        "(`maxmemory` with `allkeys-lru`).",
    )
    chunk_cache_redis_timeout: float = Field(
        0.5, gt=0, description="Seconds a Redis call may take before it counts as a miss."
    )
    chunk_cache_secret: SecretStr | None = Field(
        None,
        description="Hex secret (32 to 128 characters) signing cached chunk KV instead of "
        "`<data_dir>/chunk_kv/secret`; required with a Redis tier (the server refuses to start "
        "without it), and the same on every server sharing that Redis.",
    )
    retrieval_by_default: bool = Field(
        False,
        description="Retrieve from ingested documents when a request sends neither "
        "`documents` nor `retrieval`.",
    )
    blend_segment: bool = Field(
        False,
        description="Find known passages (library chunks, documents sent before) pasted into "
        "the prompt of requests without `documents` or `retrieval` and reuse their chunk KV, as "
        "`blend.segment: true` does per request; costs a scan of each such prompt.",
    )
    pasted_passages_max: int = Field(
        100_000,
        ge=0,
        description="Sent documents remembered so that `blend.segment` finds them pasted later "
        "(about 600 bytes each; the least recently sent are forgotten first); 0: none.",
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
    max_request_bytes: int = Field(
        16 * 1024 * 1024,
        ge=1024,
        description="Largest request body but ingest's (else 413, decided before the body is "
        "read); `/v1/documents` and `/v1/files` bodies are bounded by `max_ingest_request_bytes`.",
    )
    max_choices_per_request: int = Field(
        64, ge=1, description="Largest prompts x `n` of one request (else 400)."
    )
    shutdown_timeout: float = Field(
        8.0,
        ge=0,
        description="Seconds in-flight requests may finish after SIGTERM; then streams end "
        "with an error event and their generations are aborted.",
    )
    log_level: Literal["debug", "info", "warning", "error"] = Field("info")

    @field_validator("chunk_cache_redis_url")
    @classmethod
    def _redis_url_has_a_scheme(cls, value: str) -> str:
        if value and not value.startswith(("redis://", "rediss://", "unix://")):
            raise ValueError("must start with redis://, rediss:// or unix://")
        return value

    @field_validator("chunk_cache_secret")
    @classmethod
    def _secret_is_hex(cls, value: SecretStr | None) -> SecretStr | None:
        if value is None or not value.get_secret_value().strip():
            return None  # set but empty: unset
        shared_secret(value.get_secret_value())
        return value

    @field_validator("api_keys_file", mode="before")
    @classmethod
    def _key_file_empty_is_unset(cls, value: object) -> object:
        return None if isinstance(value, str) and not value.strip() else value  # compose's default

    @field_validator("tool_parser")
    @classmethod
    def _tool_parser_known(cls, value: str) -> str:
        if value == "auto":
            return value
        from vllm.tool_parsers import ToolParserManager  # slow to import: only when named

        known = ToolParserManager.list_registered()
        if value not in known:
            raise ValueError(f"must be 'auto' or one of vLLM's tool parsers: {', '.join(known)}")
        return value

    @field_validator("api_keys", "shared_kv_projects", mode="before")
    @classmethod
    def _split_keys(cls, value: object) -> object:
        if isinstance(value, str):
            return [key.strip() for key in value.split(",") if key.strip()]
        return value

    @field_validator("api_keys")
    @classmethod
    def _keys_parse(cls, value: list[str]) -> list[str]:
        parse_entries(value, "RAGBLEND_API_KEYS")
        return value

    @field_validator("shared_kv_projects")
    @classmethod
    def _projects_named(cls, value: list[str]) -> list[str]:
        for project in value:
            if not PROJECT_NAME.fullmatch(project):
                raise ValueError(f"{project!r} is not a project name ({PROJECT_NAME.pattern})")
        return value

    @model_validator(mode="after")
    def _redis_tier_has_a_shared_secret(self) -> Settings:
        """Without a shared secret each server signs with its own data dir's, and servers sharing
        the Redis refuse every chunk the others stored: refused here rather than found later."""
        if self.blend_enabled and self.chunk_cache_redis_url and self.chunk_cache_secret is None:
            raise ValueError(
                "RAGBLEND_CHUNK_CACHE_SECRET is not set, but a Redis tier is "
                "(RAGBLEND_CHUNK_CACHE_REDIS_URL). "
                "Servers sharing a Redis tier sign chunk KV with that secret; without it each "
                "server would use its own and refuse every chunk the others store. Set the same "
                "hex secret on every server using this Redis, e.g. "
                "RAGBLEND_CHUNK_CACHE_SECRET=$(openssl rand -hex 32)"
            )
        return self

    @model_validator(mode="after")
    def _default_models_dir(self) -> Settings:
        if self.models_dir == Path():
            self.models_dir = self.data_dir / "models"
        return self

    @cached_property
    def key_callers(self) -> dict[str, Caller]:
        """Each key of `api_keys` and who it is."""
        return parse_entries(self.api_keys, "RAGBLEND_API_KEYS")

    @cached_property
    def name_for_clients(self) -> str:
        return self.served_model_name or Path(self.model).name

    @property
    def vllm_cache_dir(self) -> Path:
        return self.data_dir / "vllm"

    @property
    def library_dir(self) -> Path:
        return self.data_dir / "library"

    @property
    def chunk_kv_dir(self) -> Path:
        return self.data_dir / "chunk_kv"
