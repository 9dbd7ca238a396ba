"""Blend statistics for requests that vLLM's front end finishes itself.

A request that ends on a stop string is finished by the front end (the detokenizer matched the
string) and aborted in the engine, so its final output carries no statistics from the
connector's scheduler. The worker reports them here as well, under the id this process gave the
request, before the forward pass that answers it; each finished output gets them back.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from engine.connector.stats import StatsInbox, front_channel
from engine.contract import PLAN_KEY, BlendStats, stats_in, stats_params

if TYPE_CHECKING:
    from vllm import SamplingParams


class FrontStats:
    """Owns the front end's statistics socket for one engine start (``channel``)."""

    def __init__(self, channel: str) -> None:
        self._inbox = StatsInbox(front_channel(channel))

    def tag(self, params: SamplingParams, request_id: str) -> SamplingParams:
        """``params`` with ``request_id`` as its blend plan's ``stats_id`` (a copy; ``params``
        may be shared by several requests), or ``params`` itself when it has no plan."""
        transfer = (params.extra_args or {}).get("kv_transfer_params") or {}
        if PLAN_KEY not in transfer:
            return params
        tagged = params.clone()
        plan = {**transfer[PLAN_KEY], "stats_id": request_id}
        tagged.extra_args = {
            **(params.extra_args or {}),
            "kv_transfer_params": {**transfer, PLAN_KEY: plan},
        }
        return tagged

    def settle(self, output: Any, request_id: str) -> BlendStats | None:
        """A finished output's statistics; written into its ``kv_transfer_params`` when only
        the worker's report here had them."""
        reported = self._inbox.collect(request_id)
        stats = stats_in(output.kv_transfer_params)
        if stats is None and reported is not None:
            output.kv_transfer_params = {
                **(output.kv_transfer_params or {}),
                **stats_params(reported),
            }
            stats = reported
        return stats

    def close(self) -> None:
        self._inbox.close()
