"""Whether a slow-tier format gives back, bit for bit, the KV of every chunk an evaluation uses.

    python -m load_tests.eval.format_exact --url http://127.0.0.1:8111 --data-dir /tmp/exact \
        --format lossless --items 200 --out docs/bench/format_exact_lossless

The server (best run with ``RAGBLEND_CHUNK_CACHE_FORMAT=raw``) is given every passage of the
held-out items that ``format_gap`` asks as a library document, and precomputes their chunks.
Every entry of its disk tier is then read back, encoded in ``--format`` exactly as the disk
and Redis tiers encode it, decoded again and compared with what was read, byte for byte (so
NaN, -0.0 and subnormals count). A format that passes on every entry hands the model the KV
raw hands it, so on these items its answers are raw's answers; ``format_gap`` checks that end
to end.
"""

from __future__ import annotations

import argparse
import io
import json
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import torch
from tqdm import tqdm

from engine.kvstore.codec import EntryReader
from engine.kvstore.disk import ENTRY_SUFFIX
from engine.kvstore.entry import ChunkKV
from engine.kvstore.layer_format import LayerFormat
from engine.kvstore.mac import EntryMac
from engine.kvstore.secret import load_or_create_secret
from gateway.cli.client_commands import connect, served_model
from load_tests.eval.fetch import DEFAULT_CACHE
from load_tests.eval.server_gap import load_held_out
from load_tests.report import output_path, scratch

INGEST_BATCH = 50
SETTLE_SECONDS = 10.0
"""Entries are written in the background: the store is read once none appeared for this long."""


def _read(path: Path, secret: bytes) -> ChunkKV:
    with path.open("rb") as stream:
        return ChunkKV.read_from(
            EntryReader(stream, path.stat().st_size, EntryMac(secret, path.stem))
        )


def round_trip(entry: ChunkKV, mac: EntryMac, layer_format: LayerFormat) -> tuple[ChunkKV, int]:
    """``entry`` encoded in ``layer_format`` and decoded again, and its encoded size."""
    data = entry.to_bytes(mac, layer_format)
    return ChunkKV.read_from(EntryReader(io.BytesIO(data), len(data), mac)), len(data)


def same_bits(a: ChunkKV, b: ChunkKV) -> bool:
    def raw(tensor: torch.Tensor) -> bytes:
        return tensor.contiguous().view(torch.uint8).numpy().tobytes()

    return (
        a.token_ids == b.token_ids and raw(a.keys) == raw(b.keys) and raw(a.values) == raw(b.values)
    )


def compare_store(store_dir: Path, secret: bytes, layer_format: LayerFormat) -> dict[str, Any]:
    """Every entry under ``store_dir`` round-tripped through ``layer_format``."""
    paths = sorted(store_dir.glob(f"*{ENTRY_SUFFIX}"))
    tokens = stored = encoded = 0
    differing = []
    for path in tqdm(paths, unit="entry", desc=f"{layer_format.name.lower()} round trip"):
        entry = _read(path, secret)
        back, size = round_trip(entry, EntryMac(secret, path.stem), layer_format)
        tokens, stored, encoded = (
            tokens + entry.num_tokens,
            stored + path.stat().st_size,
            encoded + size,
        )
        if not same_bits(entry, back):
            differing.append(path.stem)
    return {
        "entries": len(paths),
        "tokens": tokens,
        "bit_exact_entries": len(paths) - len(differing),
        "differing": differing,
        "stored_bytes_per_token": round(stored / max(1, tokens), 1),
        "format_bytes_per_token": round(encoded / max(1, tokens), 1),
    }


def store_passages(client: httpx.Client, passages: list[str]) -> None:
    """Ingest ``passages`` as documents and wait until each is precomputed (or failed)."""
    for start in range(0, len(passages), INGEST_BATCH):
        batch = [{"text": text} for text in passages[start : start + INGEST_BATCH]]
        client.post("/v1/documents", json={"documents": batch}).raise_for_status()
    with tqdm(total=len(passages), unit="document", desc="precomputing passages") as progress:
        while (done := _finished_documents(client)) < len(passages):
            progress.update(done - progress.n)
            time.sleep(2)
        progress.update(done - progress.n)


def _finished_documents(client: httpx.Client) -> int:
    finished, offset = 0, 0
    while True:
        page = client.get("/v1/documents", params={"offset": offset, "limit": 200}).json()
        finished += sum(row["status"] in ("cached", "failed") for row in page["data"])
        offset += len(page["data"])
        if not page["data"] or offset >= page["total"]:
            return finished


def wait_for_writes(store_dir: Path) -> int:
    """The number of entries once none has been added for ``SETTLE_SECONDS``."""
    count, since = -1, time.monotonic()
    while True:
        now = len(list(store_dir.glob(f"*{ENTRY_SUFFIX}")))
        if now != count:
            count, since = now, time.monotonic()
        elif time.monotonic() - since > SETTLE_SECONDS:
            return count
        time.sleep(1)


def build_parser() -> argparse.ArgumentParser:
    """The command line; ``parse_args([...])`` also gives callers the defaults."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", required=True, help="a server (RAGBLEND_CHUNK_CACHE_FORMAT=raw)")
    parser.add_argument("--data-dir", required=True, type=Path, help="that server's data dir")
    parser.add_argument("--format", choices=["lossless", "int8"], default="lossless")
    parser.add_argument("--items", type=int, default=200, help="held-out items to store")
    parser.add_argument("--data", default=str(DEFAULT_CACHE), help="BIG-bench cache (fetch.py)")
    parser.add_argument("--api-key", help="bearer key, if the server requires one")
    parser.add_argument("--out", default=scratch("format_exact_lossless"), help="<out>.json")
    return parser


def run(argv: list[str] | None = None) -> int:
    """The command line; exit status 1 when the evaluation data is missing, 2 when an entry's
    round trip is not bit for bit."""
    args = build_parser().parse_args(argv)
    items = load_held_out(args.data, args.items)
    if items is None:
        return 1
    with connect(args.url, args.api_key) as client:
        model = served_model(client)
        passages = list(dict.fromkeys(text for item in items for text in item.documents))
        store_passages(client, passages)
    chunk_kv = args.data_dir / "chunk_kv"
    wait_for_writes(chunk_kv / "store")
    layer_format = LayerFormat[args.format.upper()]
    result = compare_store(
        chunk_kv / "store", load_or_create_secret(chunk_kv / "secret"), layer_format
    )
    print({key: value for key, value in result.items() if key != "differing"})
    document = {"settings": {"items": args.items, "format": args.format, "model": model}, **result}
    out = output_path(args.out, ".json")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(document, indent=2) + "\n")
    return 0 if not result["differing"] else 2


if __name__ == "__main__":
    sys.exit(run())
