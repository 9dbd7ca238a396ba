"""bench_start's start without records hides the shared records for one start and no longer."""

from __future__ import annotations

from pathlib import Path

from engine.model_records import RECORDS_FOLDER, shared_root
from load_tests.bench_start import records_aside


def test_the_records_are_out_of_reach_for_the_block_and_back_as_they_were(tmp_path: Path) -> None:
    records = shared_root(tmp_path) / RECORDS_FOLDER
    records.mkdir(parents=True)
    (records / "llama.json").write_text("kept")
    with records_aside(tmp_path):
        assert not records.exists()
        records.mkdir()  # the server started in the block keeps the record it made
        (records / "llama.json").write_text("made in the block")
    assert {path.name: path.read_text() for path in records.iterdir()} == {"llama.json": "kept"}


def test_without_records_the_block_leaves_none_behind(tmp_path: Path) -> None:
    records = shared_root(tmp_path) / RECORDS_FOLDER
    with records_aside(tmp_path):
        records.mkdir(parents=True)
        (records / "llama.json").write_text("made in the block")
    assert not records.exists()
