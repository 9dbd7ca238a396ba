"""The values table of docs/deploy-kubernetes.md is the one scripts/helm_values_table.py generates
from the chart's values.yaml, and every value there is documented."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.unit.script_import import import_script

helm_values_table = import_script("helm_values_table")


def test_doc_table_is_the_generated_one() -> None:
    _, in_doc, _ = helm_values_table.DOC_TABLE.split(
        helm_values_table.DOC_TABLE.doc.read_text(encoding="utf-8")
    )
    assert in_doc == helm_values_table.table(), (
        "docs/deploy-kubernetes.md's values table is stale: "
        "run python scripts/helm_values_table.py --write"
    )


def test_every_value_has_a_row_or_a_documented_section(tmp_path: Path) -> None:
    values = tmp_path / "values.yaml"
    values.write_text(
        "# -- Documented.\nshown: 1\n# -- A section.\nsection:\n  inner: 2\nhidden: 3\n",
        encoding="utf-8",
    )
    with pytest.raises(ValueError, match=r"undocumented values .*'hidden'"):
        helm_values_table.table(values)
    values.write_text(values.read_text(encoding="utf-8").replace("hidden: 3\n", ""), "utf-8")
    rows = helm_values_table.table(values).splitlines()[2:]
    assert rows == [
        "| `shown` | `1` | Documented. |",
        '| `section` | `{"inner": 2}` | A section. |',
    ]


def test_continued_comments_join_and_blank_lines_end_them(tmp_path: Path) -> None:
    values = tmp_path / "values.yaml"
    values.write_text(
        "# A header, not a doc.\n\n# -- First line\n#   and second.\nkey:\n"
        "  # -- Child.\n  child: x\n",
        encoding="utf-8",
    )
    rows = helm_values_table.table(values).splitlines()[2:]
    assert rows == ["| `key` |  | First line and second. |", '| `key.child` | `"x"` | Child. |']
