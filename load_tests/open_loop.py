"""Open-loop load: requests arrive as a Poisson process at a set rate, whatever the server does.

Closed-loop clients (:func:`load_tests.client.run_load`) slow down with the server; here the
offered load stays fixed, so a server that cannot keep up shows it as growing TTFT and errors.
"""

from __future__ import annotations

import asyncio
import itertools
import random
import time
from collections.abc import Iterator
from typing import Final

import httpx

from load_tests.client import LoadPlan, RequestBudget, stream_request
from load_tests.stats import RequestRecord

DROPPED: Final = "dropped"
"""Error name of an arrival that was not sent because ``max_in_flight`` requests were open."""

DEFAULT_MAX_IN_FLIGHT: Final = 64


def poisson_gaps(rate_per_s: float, seed: int) -> Iterator[float]:
    """Endless seconds between Poisson arrivals: exponential gaps with mean ``1 / rate_per_s``."""
    if rate_per_s <= 0:
        raise ValueError(f"the arrival rate must be positive, got {rate_per_s}")
    rng = random.Random(seed)
    return (rng.expovariate(rate_per_s) for _ in itertools.count())


async def run_at_rate(
    client: httpx.AsyncClient,
    plan: LoadPlan,
    rate_per_s: float,
    budget: RequestBudget,
    seed: int,
    max_in_flight: int = DEFAULT_MAX_IN_FLIGHT,
) -> tuple[list[RequestRecord], float]:
    """Send a request at each Poisson arrival until the budget is spent; return records and time.

    Every request is its own task, so concurrency is whatever the arrivals and the server make
    it. An arrival that finds ``max_in_flight`` requests open is not sent; it is recorded as a
    failed request named :data:`DROPPED`. Once the budget is spent (the whole duration, unless
    the request count runs out first) the open requests are awaited, each bounded by the plan's
    request timeout; the wall time includes that wait. Prompts are taken in order from
    ``plan.prompts``, one per arrival, wrapping around.
    """
    if max_in_flight < 1:
        raise ValueError(f"max_in_flight must be at least 1, got {max_in_flight}")
    started = time.perf_counter()
    arrival = started
    sent: list[asyncio.Task[RequestRecord]] = []
    open_requests: set[asyncio.Task[RequestRecord]] = set()
    dropped: list[RequestRecord] = []
    for index, gap in enumerate(poisson_gaps(rate_per_s, seed)):
        arrival += gap
        if arrival >= budget.deadline:
            await asyncio.sleep(max(0.0, budget.deadline - time.perf_counter()))
            break
        await asyncio.sleep(max(0.0, arrival - time.perf_counter()))
        if not budget.take():
            break
        if len(open_requests) >= max_in_flight:
            dropped.append(RequestRecord(latency_s=0.0, error=DROPPED))
            continue
        prompt = plan.prompts[index % len(plan.prompts)]
        task = asyncio.create_task(stream_request(client, plan, prompt))
        open_requests.add(task)
        task.add_done_callback(open_requests.discard)
        sent.append(task)
    records = [*await asyncio.gather(*sent), *dropped]
    return records, time.perf_counter() - started
