"""The one configuration surface: environment variables prefixed ``RAGBLEND_``.

``Settings`` gathers the settings of each part, declared beside one another by concern: the
engine and its model (``gateway.engine_settings``), the HTTP server (``gateway.server_settings``),
the document library (``gateway.library_settings``), the chunk KV store
(``gateway.chunk_cache_settings``) and blending (``gateway.blend_settings``). What spans parts
lives here: the check that a Redis tier has a shared secret, and where each part persists under
the data directory. The README's settings table lists them in that order
(``scripts/settings_table.py``).
"""

from __future__ import annotations

from pathlib import Path

from pydantic import model_validator
from pydantic_settings import SettingsConfigDict

from gateway.blend_settings import BlendServerSettings
from gateway.chunk_cache_settings import ChunkCacheSettings
from gateway.engine_settings import EngineSettings
from gateway.library_settings import LibrarySettings
from gateway.server_settings import ServerSettings


class Settings(
    EngineSettings, ServerSettings, LibrarySettings, ChunkCacheSettings, BlendServerSettings
):
    model_config = SettingsConfigDict(env_prefix="RAGBLEND_", extra="ignore")

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

    @property
    def vllm_cache_dir(self) -> Path:
        return self.data_dir / "vllm"

    @property
    def library_dir(self) -> Path:
        return self.data_dir / "library"

    @property
    def chunk_kv_dir(self) -> Path:
        return self.data_dir / "chunk_kv"
