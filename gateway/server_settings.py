"""Settings of the HTTP server (part of ``Settings``): where it listens, whom it lets in and as
which project, how much it admits at once, the bounds on a request, and how it shuts down."""

from __future__ import annotations

from functools import cached_property
from pathlib import Path
from typing import Annotated, Literal

from pydantic import Field, field_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from gateway.callers import PROJECT_NAME, Caller, parse_entries
from retriever import DEFAULT_PROJECT


class ServerSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="RAGBLEND_", extra="ignore")

    host: str = Field("127.0.0.1", description="Address the HTTP server binds.")
    port: int = Field(8000, ge=1, le=65535, description="Port the HTTP server binds.")
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
    max_concurrent_requests: int = Field(
        64,
        ge=1,
        description="Requests admitted at once, and as many `/v1/documents` and `/v1/files` "
        "ingests beside them; more of either are refused with 429.",
    )
    background_quiet_s: float = Field(
        1.0,
        ge=0,
        description="Seconds without a request before background engine work (settling first "
        "sightings' chunks behind the prefix, learning contexts) starts; a request arriving "
        "waits for one piece of it at most. Library chunks' KV precompute waits as long after "
        "the last ingest request.",
    )
    max_tokens_default: int = Field(
        256, ge=1, description="`max_tokens` used when a request does not set it."
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
    keep_alive_s: float = Field(
        75.0,
        gt=0,
        description="Seconds an idle kept-alive connection stays open. Longer than clients' and "
        "balancers' own idle limits (httpx 5 s, nginx 60 s), so the client closes it first and "
        "never sends a request on a connection the server is closing.",
    )
    shutdown_timeout: float = Field(
        8.0,
        ge=0,
        description="Seconds in-flight requests may finish after SIGTERM; then streams end "
        "with an error event and their generations are aborted.",
    )
    log_level: Literal["debug", "info", "warning", "error"] = Field("info")

    @field_validator("api_keys_file", mode="before")
    @classmethod
    def _key_file_empty_is_unset(cls, value: object) -> object:
        return None if isinstance(value, str) and not value.strip() else value  # compose's default

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

    @cached_property
    def key_callers(self) -> dict[str, Caller]:
        """Each key of `api_keys` and who it is."""
        return parse_entries(self.api_keys, "RAGBLEND_API_KEYS")
