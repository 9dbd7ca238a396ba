"""Worker-side blending settings, passed through vLLM's ``kv_connector_extra_config``."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from engine.blend.select import Metric

DEFAULT_CHECK_LAYERS: tuple[tuple[int, float], ...] = ((1, 2.0), (2, 1.5), (3, 1.0))


@dataclass(frozen=True)
class BlendSettings:
    model_name: str
    store_dir: str
    stats_dir: str
    memory_bytes: int
    disk_bytes: int | None
    chunk_prefix: tuple[int, ...]
    """Token ids each chunk is precomputed behind; they are not stored."""
    check_layers: tuple[tuple[int, float], ...] = DEFAULT_CHECK_LAYERS
    metric: Metric = "v"
    normalize: bool = False
    chunk_head_tokens: int = 8

    def to_extra_config(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_extra_config(cls, extra: dict[str, Any]) -> BlendSettings:
        return cls(
            model_name=extra["model_name"],
            store_dir=extra["store_dir"],
            stats_dir=extra["stats_dir"],
            memory_bytes=int(extra["memory_bytes"]),
            disk_bytes=extra.get("disk_bytes"),
            chunk_prefix=tuple(extra["chunk_prefix"]),
            check_layers=tuple(
                (int(layer), float(scale)) for layer, scale in extra["check_layers"]
            ),
            metric=extra.get("metric", "v"),
            normalize=bool(extra.get("normalize", False)),
            chunk_head_tokens=int(extra.get("chunk_head_tokens", 8)),
        )
