"""The README's configuration table is the settings' documentation: every setting is in it."""

from __future__ import annotations

from pathlib import Path

from gateway.settings import Settings

README = Path(__file__).resolve().parents[2] / "README.md"


def test_every_setting_has_a_row_in_the_readme_table() -> None:
    readme = README.read_text(encoding="utf-8")
    missing = [
        name for name in Settings.model_fields if f"| `RAGBLEND_{name.upper()}` |" not in readme
    ]
    assert not missing, f"settings without a README row: {missing}"
