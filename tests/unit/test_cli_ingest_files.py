"""``ragblend ingest``: files go up several a request; a refused group is sent again file by file,
so every good file goes in and the bad one is named."""

from __future__ import annotations

import re
from pathlib import Path

import httpx
import pytest

from gateway.cli import ingest_files

_FILENAME = re.compile(rb'name="file"; filename="([^"]+)"')


class _Server:
    """Answers ``/v1/documents`` uploads as the server does; refuses any with ``broken.bin``."""

    def __init__(self) -> None:
        self.uploads: list[list[str]] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        names = [name.decode() for name in _FILENAME.findall(request.read())]
        self.uploads.append(names)
        if "broken.bin" in names:
            error = {"message": "broken.bin: unsupported file type", "type": "invalid_request"}
            return httpx.Response(415, json={"error": error})
        data = [
            {"id": f"doc-{name}", "created": True, "num_chunks": 1, "status": "indexed"}
            for name in names
        ]
        return httpx.Response(200, json={"object": "list", "data": data})


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> _Server:
    fake = _Server()

    def connect(url: str, api_key: str | None) -> httpx.Client:
        return httpx.Client(base_url=url, transport=httpx.MockTransport(fake))

    monkeypatch.setattr(ingest_files, "connect", connect)
    return fake


def test_files_go_up_in_groups(server: _Server, tmp_path: Path, capsys) -> None:
    for number in range(20):
        (tmp_path / f"note-{number:02}.txt").write_text(f"Note {number}.")
    assert ingest_files.ingest("http://ragblend", None, [str(tmp_path)]) == 0
    assert [len(names) for names in server.uploads] == [ingest_files.GROUP_FILES, 4]
    assert "20 of 20 files ingested" in capsys.readouterr().err


def test_a_refused_group_is_sent_again_file_by_file(
    server: _Server, tmp_path: Path, capsys
) -> None:
    for name in ("a.txt", "broken.bin", "c.txt"):
        (tmp_path / name).write_text(name)
    assert ingest_files.ingest("http://ragblend", None, [str(tmp_path)]) == 1
    assert server.uploads == [
        ["a.txt", "broken.bin", "c.txt"],
        ["a.txt"],
        ["broken.bin"],
        ["c.txt"],
    ]
    report = capsys.readouterr()
    assert "broken.bin: 415 broken.bin: unsupported file type" in report.out + report.err
    assert "2 of 3 files ingested" in report.err
