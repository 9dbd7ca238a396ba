"""BIG-bench fetch without network: a tiny archive and stand-in pip commands."""

from __future__ import annotations

import io
import shlex
import sys
import tarfile
from pathlib import Path

import pytest

from load_tests.eval import fetch
from load_tests.eval.fetch import FetchError, download_archive, extract_tasks, fetch_bigbench

ROOT = "bigbench-1.0.0/bigbench/benchmark_tasks"


def _make_archive(path: Path) -> Path:
    files = {
        f"{ROOT}/disfl_qa/task.json": b'{"examples": []}',
        f"{ROOT}/gem/xsum/task.json": b'{"examples": [1]}',
        f"{ROOT}/gem/other/task.json": b"{}",
        f"{ROOT}/natural_instructions/subtask001_quoref_question_generation/task.json": b"{}",
        "bigbench-1.0.0/setup.py": b"",
        f"{ROOT}/disfl_qa/../../../evil.json": b"{}",
    }
    with tarfile.open(path, "w:gz") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path


def _fake_pip(tmp_path: Path, name: str, body: str) -> str:
    script = tmp_path / f"{name}.py"
    script.write_text(f"import sys, shutil\n{body}\n")
    return shlex.join([sys.executable, str(script)])


def test_extract_keeps_only_wanted_task_files(tmp_path: Path) -> None:
    archive = _make_archive(tmp_path / "bigbench-1.0.0.tar.gz")
    files = extract_tasks(archive, tmp_path / "cache", ("disfl_qa", "gem/xsum"))
    assert sorted(files) == ["disfl_qa/task.json", "gem/xsum/task.json"]
    assert (tmp_path / "cache/gem/xsum/task.json").read_bytes() == b'{"examples": [1]}'
    assert not (tmp_path / "evil.json").exists() and not (tmp_path / "cache/gem/other").exists()


def test_fetch_is_idempotent_through_its_marker(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[Path] = []

    def fake_download(dest: Path, pip: str | None = None) -> Path:
        calls.append(dest)
        return _make_archive(dest / "bigbench-1.0.0.tar.gz")

    monkeypatch.setattr(fetch, "download_archive", fake_download)
    cache = tmp_path / "eval" / "bigbench"
    fetch_bigbench(cache)
    assert (cache / "disfl_qa/task.json").is_file() and (cache / fetch.MARKER).is_file()
    assert not list(cache.parent.glob("bigbench-dl-*"))  # the archive's folder is gone
    fetch_bigbench(cache)
    assert len(calls) == 1
    fetch_bigbench(cache, force=True)
    assert len(calls) == 2


def test_download_retries_with_another_pip_only_on_the_metadata_rejection(
    tmp_path: Path,
) -> None:
    rejecting = _fake_pip(
        tmp_path,
        "new_pip",
        'print("ERROR: ... cannot declare direct URL dependencies."); sys.exit(1)',
    )
    saving = _fake_pip(
        tmp_path,
        "old_pip",
        'dest = sys.argv[sys.argv.index("-d") + 1]\n'
        'open(dest + "/bigbench-1.0.0.tar.gz", "wb").close()',
    )
    dest = tmp_path / "dl"
    dest.mkdir()
    cmds = [shlex.split(rejecting), shlex.split(saving)]
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(fetch, "pip_commands", lambda pip: cmds)
        assert download_archive(dest).name == "bigbench-1.0.0.tar.gz"


def test_download_failure_is_a_clear_error(tmp_path: Path) -> None:
    failing = _fake_pip(tmp_path, "broken_pip", 'print("network down"); sys.exit(2)')
    with pytest.raises(FetchError, match="network down"):
        download_archive(tmp_path, pip=failing)
