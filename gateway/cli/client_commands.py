"""``ragblend ingest`` and ``ragblend query``: thin clients of a running server."""

from __future__ import annotations

import json
import mimetypes
import sys
from pathlib import Path

import httpx
from tqdm import tqdm


def connect(url: str, api_key: str | None) -> httpx.Client:
    """A client of the server at ``url``, with the bearer key when there is one."""
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    return httpx.Client(base_url=url, headers=headers, timeout=600)


def served_model(client: httpx.Client) -> str:
    """The name of the model the server serves."""
    reply = client.get("/v1/models")
    reply.raise_for_status()
    return reply.json()["data"][0]["id"]


def _files(paths: list[str]) -> list[Path]:
    found: list[Path] = []
    for name in paths:
        path = Path(name)
        found += sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
    return found


def ingest(url: str, api_key: str | None, paths: list[str]) -> int:
    """Upload files (folders recursively); a bad file is reported and the rest still go in."""
    files = _files(paths)
    failures = 0
    with connect(url, api_key) as client, tqdm(files, unit="file", desc="ingest") as bar:
        for path in bar:
            content_type = mimetypes.guess_type(path.name)[0] or "application/octet-stream"
            try:
                data = path.read_bytes()
            except OSError as exc:
                bar.write(f"{path}: {exc}")
                failures += 1
                continue
            reply = client.post("/v1/documents", files={"file": (path.name, data, content_type)})
            if reply.status_code >= 400:
                failures += 1
                bar.write(f"{path}: {reply.status_code} {_error_message(reply)}")
                continue
            for document in reply.json()["data"]:
                state = "new" if document["created"] else "already ingested"
                bar.write(f"{path}: {document['id']} ({document['num_chunks']} chunks, {state})")
    print(f"{len(files) - failures} of {len(files)} files ingested", file=sys.stderr)
    return 1 if failures else 0


def query(url: str, api_key: str | None, question: str, top_k: int | None, mode: str | None) -> int:
    """Ask with retrieval, stream the answer, then list the chunks it was given."""
    with connect(url, api_key) as client:
        model = served_model(client)
        body = {
            "model": model,
            "messages": [{"role": "user", "content": question}],
            "retrieval": {} if top_k is None else {"top_k": top_k},
            **({"blend": {"mode": mode}} if mode else {}),
            "temperature": 0,
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        with client.stream("POST", "/v1/chat/completions", json=body) as reply:
            if reply.status_code >= 400:
                reply.read()
                print(f"error: {reply.status_code} {_error_message(reply)}", file=sys.stderr)
                return 1
            sources = _print_stream(reply)
    print()
    for source in sources:
        print(
            f"  [{source['score']:.3f}] {source['document_id']} chunk {source['chunk_index']}",
            file=sys.stderr,
        )
    return 0


def _print_stream(reply: httpx.Response) -> list[dict]:
    sources: list[dict] = []
    for line in reply.iter_lines():
        if not line.startswith("data: ") or line == "data: [DONE]":
            continue
        event = json.loads(line[len("data: ") :])
        for choice in event.get("choices", []):
            print(choice["delta"].get("content") or "", end="", flush=True)
        sources = event.get("retrieval", sources)
    return sources


def _error_message(reply: httpx.Response) -> str:
    try:
        return reply.json()["error"]["message"]
    except (ValueError, KeyError, TypeError):
        return reply.text[:200]
