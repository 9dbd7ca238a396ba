"""Settings of the chunk KV store (part of ``Settings``): the size of its memory and disk tiers,
how the disk and Redis tiers encode chunk KV, the Redis tier shared by servers of one model, and
the secret that signs every stored chunk."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, SecretStr, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from engine.contract import shared_secret


class ChunkCacheSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="RAGBLEND_", extra="ignore")

    chunk_cache_memory_gib: float = Field(
        2.0,
        gt=0,
        description="Memory tier of the chunk KV store, in GiB (page-locked when serving on a "
        "CUDA GPU, so chunk KV is copied to it asynchronously).",
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
    chunk_cache_recompute_when_faster: bool = Field(
        True,
        description="Compute a chunk instead of loading its KV from disk or Redis when this "
        "server's own measurements say loading would take longer; off: always load a hit "
        "(spares the engine's compute for other requests when it, not the link, is busy).",
    )
    chunk_cache_secret: SecretStr | None = Field(
        None,
        description="Hex secret (32 to 128 characters) signing cached chunk KV instead of "
        "`<data_dir>/chunk_kv/secret`; required with a Redis tier (the server refuses to start "
        "without it), and the same on every server sharing that Redis.",
    )

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
