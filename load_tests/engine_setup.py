"""An in-process engine with blending, for benchmarks and evaluations (no HTTP in between)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from engine.contract import Recipe

if TYPE_CHECKING:
    from gateway.rag.chunked_prompt import PrefixKind


@dataclass
class BenchEngine:
    engine: Any
    tokenizer: Any
    prefix: list[int]
    recipe: Recipe
    """What a mode spec's choices go over (``ModeSpec.recipe``): the engine's defaults."""


def start_engine(
    model: str,
    models_dir: Path,
    workdir: Path,
    max_model_len: int,
    memory_bytes: int = 4 << 30,
    disk_bytes: int | None = None,
    prefix_kind: PrefixKind = "plain",
    kv_cache_gib: float = 4,
    profile_dir: Path | None = None,
    recipe: Recipe | None = None,
    cpu_reserved_cores: int | None = None,
    **blend_settings: Any,
) -> BenchEngine:
    """Provision ``model`` if needed and start it with a chunk store under ``workdir``;
    ``recipe`` (default: ``Recipe()``) is what the run's mode specs choose over; ``disk_bytes``
    None: the disk tier's default size."""
    from transformers import AutoTokenizer

    from engine.contract import BlendSettings
    from engine.model_records import shared_root
    from engine.models.provision import resolve_model
    from engine.options import EngineOptions
    from engine.platform import resolve_device, resolve_dtype
    from engine.runtime import Engine
    from gateway.rag.chunked_prompt import chunk_prefix

    model_dir = resolve_model(model, models_dir)
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    prefix = chunk_prefix(tokenizer, prefix_kind)
    blend = BlendSettings(
        model_name=model,
        chunk_kv_dir=str(workdir),
        memory_bytes=memory_bytes,
        disk_bytes=disk_bytes,
        chunk_prefix=tuple(prefix),
        **blend_settings,
    )
    device = resolve_device("auto")
    options = EngineOptions(
        model_dir=model_dir,
        device=device,
        cache_dir=workdir / "vllm",
        shared_records_dir=shared_root(models_dir),
        max_model_len=max_model_len,
        dtype=resolve_dtype("auto", device),
        kv_cache_gib=kv_cache_gib,
        gpu_memory_utilization=0.85,
        enable_prefix_caching=True,
        max_num_seqs=4,
        cpu_reserved_cores=cpu_reserved_cores,
        blend=blend,
        profile_dir=profile_dir,
    )
    return BenchEngine(Engine(options), tokenizer, prefix, recipe or Recipe())
