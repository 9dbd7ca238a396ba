"""The README's settings table is generated from the settings class: every setting, its
environment variable, default and description, as ``scripts/settings_table.py`` writes them."""

from __future__ import annotations

from pathlib import Path

from pydantic import Field, SecretStr

from gateway.settings import Settings
from tests.unit.script_import import import_script

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
settings_table = import_script("settings_table")


def test_readme_table_is_the_generated_one() -> None:
    _, in_readme, _ = settings_table.README_TABLE.split(README.read_text(encoding="utf-8"))
    assert in_readme == settings_table.table(Settings), (
        "the README's settings table is stale: run python scripts/settings_table.py --write"
    )


def test_every_setting_has_one_row() -> None:
    rows = settings_table.table(Settings).splitlines()[2:]
    assert len(rows) == len(Settings.model_fields)
    for name in Settings.model_fields:
        assert sum(row.startswith(f"| `RAGBLEND_{name.upper()}` |") for row in rows) == 1, name


def test_a_changed_default_or_description_makes_the_readme_stale(tmp_path: Path) -> None:
    class Changed(Settings):
        port: int = Field(9000, description="Port the HTTP server binds.")
        host: str = Field("127.0.0.1", description="Another description.")

    current, changed = settings_table.table(Settings), settings_table.table(Changed)
    differing = set(changed.splitlines()) - set(current.splitlines())
    assert {row.split(" | ")[0] for row in differing} == {"| `RAGBLEND_PORT`", "| `RAGBLEND_HOST`"}

    stale = tmp_path / "README.md"
    text = settings_table.README_TABLE.with_table(README.read_text(encoding="utf-8"), changed)
    stale.write_text(text, encoding="utf-8")
    assert settings_table.main(["--check", "--doc", str(stale)]) == 1
    assert settings_table.main(["--write", "--doc", str(stale)]) == 0
    assert settings_table.main(["--check", "--doc", str(stale)]) == 0
    assert stale.read_text(encoding="utf-8") == README.read_text(encoding="utf-8")


def test_defaults_do_not_depend_on_the_environment(monkeypatch) -> None:
    monkeypatch.setenv("RAGBLEND_PORT", "9999")
    monkeypatch.setenv("RAGBLEND_DATA_DIR", "/somewhere/else")
    monkeypatch.setenv("RAGBLEND_API_KEYS", "key-from-the-environment")
    table = settings_table.table(Settings)
    assert "9999" not in table and "/somewhere/else" not in table
    assert "key-from-the-environment" not in table
    assert "| `RAGBLEND_MODELS_DIR` | `<data_dir>/models` |" in table


def test_secret_defaults_are_never_printed() -> None:
    class WithSecrets(Settings):
        chunk_cache_secret: SecretStr | None = Field(SecretStr("ab" * 16), description="x")
        api_keys: list[str] = Field(default_factory=lambda: ["k-123"], description="y")

    table = settings_table.table(WithSecrets)
    assert "abab" not in table and "k-123" not in table
    assert "| `RAGBLEND_CHUNK_CACHE_SECRET` | (set, not shown) |" in table
    assert "| `RAGBLEND_API_KEYS` | (set, not shown) |" in table
