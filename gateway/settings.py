"""The one configuration surface: environment variables prefixed ``RAGBLEND_``."""

from __future__ import annotations

from functools import cached_property
from pathlib import Path
from typing import Annotated, Literal

from pydantic import Field, field_validator, model_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict


class Settings(BaseSettings):
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
        description="Comma-separated bearer tokens; empty disables authentication.",
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
    dtype: Literal["bfloat16", "float16", "float32"] = Field(
        "bfloat16", description="Weights and activations dtype."
    )
    enable_prefix_caching: bool = Field(True, description="vLLM's own exact-prefix KV reuse.")
    max_num_seqs: int = Field(16, ge=1, description="Sequences the engine batches at once.")
    max_concurrent_requests: int = Field(
        64, ge=1, description="Requests admitted at once; more are refused with 429."
    )
    max_tokens_default: int = Field(
        256, ge=1, description="`max_tokens` used when a request does not set it."
    )
    log_level: Literal["debug", "info", "warning", "error"] = Field("info")

    @field_validator("api_keys", mode="before")
    @classmethod
    def _split_keys(cls, value: object) -> object:
        if isinstance(value, str):
            return [key.strip() for key in value.split(",") if key.strip()]
        return value

    @model_validator(mode="after")
    def _default_models_dir(self) -> Settings:
        if self.models_dir == Path():
            self.models_dir = self.data_dir / "models"
        return self

    @cached_property
    def name_for_clients(self) -> str:
        return self.served_model_name or Path(self.model).name

    @property
    def vllm_cache_dir(self) -> Path:
        return self.data_dir / "vllm"
