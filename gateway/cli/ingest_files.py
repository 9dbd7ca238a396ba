"""``ragblend ingest``: upload files and folders to a running server, several files a request.

Files go to ``/v1/documents`` in groups, so the server embeds their chunks together and stores
each group in one transaction, rather than one file per request. A group the server refuses
(a file it cannot read, a group over its limits) is sent again file by file: the rest still go
in and the file at fault is named. The progress bar counts files.
"""

from __future__ import annotations

import mimetypes
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
from tqdm import tqdm

from gateway.cli.client_commands import connect, error_message

GROUP_FILES = 16
GROUP_BYTES = 4 << 20
"""Files and bytes a request carries at most; well within a server's defaults
(``max_documents_per_request``, ``max_ingest_request_bytes``)."""

Upload = tuple[Path, bytes]


def ingest(url: str, api_key: str | None, paths: list[str]) -> int:
    """Upload files (folders recursively); a bad file is reported and the rest still go in."""
    files = _files(paths)
    ingested = 0
    with connect(url, api_key) as client, tqdm(total=len(files), unit="file", desc="ingest") as bar:
        for group in _groups(files, bar):
            ingested += _send(client, group, bar)
    print(f"{ingested} of {len(files)} files ingested", file=sys.stderr)
    return 0 if ingested == len(files) else 1


def _files(paths: list[str]) -> list[Path]:
    found: list[Path] = []
    for name in paths:
        path = Path(name)
        found += sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
    return found


def _groups(files: list[Path], bar: tqdm) -> Iterator[list[Upload]]:
    """The readable files with their bytes, in groups; an unreadable one is reported."""
    group: list[Upload] = []
    size = 0
    for path in files:
        try:
            data = path.read_bytes()
        except OSError as exc:
            bar.write(f"{path}: {exc}")
            continue
        if group and (len(group) == GROUP_FILES or size + len(data) > GROUP_BYTES):
            yield group
            group, size = [], 0
        group.append((path, data))
        size += len(data)
    if group:
        yield group


def _send(client: httpx.Client, group: list[Upload], bar: tqdm) -> int:
    """Upload `group` in one request, or file by file if it is refused; the files ingested."""
    fields = [("file", (path.name, data, _content_type(path))) for path, data in group]
    reply = client.post("/v1/documents", files=fields)
    if reply.status_code >= 400:
        if len(group) > 1:
            return sum(_send(client, [upload], bar) for upload in group)
        bar.write(f"{group[0][0]}: {reply.status_code} {error_message(reply)}")
        return 0
    for (path, _), document in zip(group, reply.json()["data"], strict=True):
        state = "new" if document["created"] else "already ingested"
        bar.write(f"{path}: {document['id']} ({document['num_chunks']} chunks, {state})")
    bar.update(len(group))
    return len(group)


def _content_type(path: Path) -> str:
    return mimetypes.guess_type(path.name)[0] or "application/octet-stream"
