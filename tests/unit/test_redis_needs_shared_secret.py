"""A Redis tier without `RAGBLEND_CHUNK_CACHE_SECRET` is refused before the server starts.

Each server would otherwise sign with its own data dir's secret and refuse every chunk the others
stored. The integration test in tests/integration/test_redis_tier.py runs `ragblend serve` against
a real redis-server; these check the rule and its message without one.
"""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from gateway.cli.main import main
from gateway.settings import Settings

REDIS_URL = "redis://127.0.0.1:6379/0"


@pytest.fixture(autouse=True)
def no_settings_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("RAGBLEND_CHUNK_CACHE_SECRET", raising=False)
    monkeypatch.delenv("RAGBLEND_BLEND_ENABLED", raising=False)


def test_a_redis_tier_without_a_shared_secret_is_refused() -> None:
    with pytest.raises(ValidationError, match="RAGBLEND_CHUNK_CACHE_SECRET is not set"):
        Settings(chunk_cache_redis_url=REDIS_URL)


def test_an_empty_secret_counts_as_unset() -> None:
    with pytest.raises(ValidationError, match="RAGBLEND_CHUNK_CACHE_SECRET is not set"):
        Settings(chunk_cache_redis_url=REDIS_URL, chunk_cache_secret=" ")


def test_a_redis_tier_with_a_shared_secret_is_accepted() -> None:
    settings = Settings(chunk_cache_redis_url=REDIS_URL, chunk_cache_secret="ab" * 32)
    assert settings.chunk_cache_redis_url == REDIS_URL


def test_without_redis_or_without_blending_no_secret_is_needed() -> None:
    assert Settings().chunk_cache_secret is None
    assert not Settings(chunk_cache_redis_url=REDIS_URL, blend_enabled=False).blend_enabled


def test_serve_exits_non_zero_naming_the_secret_and_how_to_make_one(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("RAGBLEND_CHUNK_CACHE_REDIS_URL", REDIS_URL)
    assert main(["serve"]) == 2
    error = capsys.readouterr().err
    assert error.startswith("error: invalid settings: RAGBLEND_CHUNK_CACHE_SECRET is not set")
    assert "openssl rand -hex 32" in error


def test_other_invalid_settings_are_named_by_their_variable(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("RAGBLEND_PORT", "0")
    assert main(["serve"]) == 2
    assert capsys.readouterr().err.startswith("error: invalid settings: RAGBLEND_PORT: ")
