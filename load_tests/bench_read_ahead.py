"""CPU time of reading one prompt's chunk KV ahead of a blend: one thread for every chunk, as the
blend does, against a thread per chunk.

On a CPU engine the model's layers run on every core, so whatever CPU the load takes comes out of
the compute it hides behind; the wall time of the load alone says little, its CPU time is the
cost. This streams random bf16 chunks (the 0.5B model's geometry by default) from a disk and a
Redis tier (its own loopback redis-server) in the given format, layer by layer across chunks as
a blend reads them, and prints the median wall and process CPU time of each way.

    python -m load_tests.bench_read_ahead [--chunks 16] [--tokens 512] [--format lossless]
"""

from __future__ import annotations

import argparse
import resource
import statistics
import tempfile
import time
from pathlib import Path

import torch

from engine.kvstore.base import KVTier, LayerStream
from engine.kvstore.disk import DiskTier
from engine.kvstore.entry import ChunkKV
from engine.kvstore.keys import ChunkKey
from engine.kvstore.layer_format import LayerFormat
from engine.kvstore.prefetch import read_ahead
from engine.kvstore.redis_tier import RedisTier
from load_tests.redis_launcher import running_redis

SECRET = bytes(range(32))


def cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def random_chunks(count: int, tokens: int, layers: int, heads: int, dim: int) -> list[ChunkKV]:
    generator = torch.Generator().manual_seed(0)
    shape = (layers, tokens, heads, dim)
    chunks = []
    for index in range(count):
        keys = (torch.randn(shape, generator=generator) * 2).to(torch.bfloat16)
        values = torch.randn(shape, generator=generator).to(torch.bfloat16)
        chunks.append(ChunkKV(keys, values, list(range(index * tokens, (index + 1) * tokens))))
    return chunks


def stream_once(tier: KVTier, keys: list[ChunkKey], thread_each: bool) -> tuple[float, float]:
    """(wall, CPU) seconds to read every layer of every key, layer by layer across keys."""
    wall, cpu = time.perf_counter(), cpu_seconds()
    sources = [tier.load_layers(key) for key in keys]
    if any(source is None for source in sources):
        raise RuntimeError(f"{tier.name} lost an entry")
    opened: list[LayerStream] = [source for source in sources if source is not None]
    if thread_each:
        streams = [stream for source in opened for stream in read_ahead([source])]
    else:
        streams = read_ahead(opened)
    for _ in range(opened[0].num_layers):
        for stream in streams:
            next(stream)
    for stream in streams:
        stream.close()
    return time.perf_counter() - wall, cpu_seconds() - cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--chunks", type=int, default=16)
    parser.add_argument("--tokens", type=int, default=512)
    parser.add_argument("--layers", type=int, default=24)
    parser.add_argument("--kv-heads", type=int, default=2)
    parser.add_argument("--head-dim", type=int, default=64)
    parser.add_argument("--format", choices=("raw", "lossless", "int8"), default="lossless")
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    chunks = random_chunks(args.chunks, args.tokens, args.layers, args.kv_heads, args.head_dim)
    keys = [ChunkKey.for_chunk("bench", chunk.token_ids) for chunk in chunks]
    layer_format = LayerFormat[args.format.upper()]
    with tempfile.TemporaryDirectory() as workdir, running_redis(Path(workdir) / "r") as url:
        tiers: list[KVTier] = [
            DiskTier(Path(workdir) / "disk", SECRET, layer_format=layer_format),
            RedisTier(url, SECRET, 5.0, layer_format=layer_format),
        ]
        for tier in tiers:
            for key, chunk in zip(keys, chunks, strict=True):
                tier.put(key, chunk)
            for thread_each in (True, False):
                runs = [stream_once(tier, keys, thread_each) for _ in range(args.repeats)]
                wall = statistics.median(run[0] for run in runs)
                cpu = statistics.median(run[1] for run in runs)
                way = "a thread per chunk" if thread_each else "one thread"
                print(f"{tier.name:6} {way:19} wall {wall:6.3f} s  CPU {cpu:6.3f} s")


if __name__ == "__main__":
    main()
