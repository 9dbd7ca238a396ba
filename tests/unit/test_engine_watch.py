"""A dead engine is noticed, so the server can exit and be restarted."""

from __future__ import annotations

import asyncio

from gateway.http.engine_watch import wait_for_engine_death


async def test_the_watch_returns_once_the_engine_is_no_longer_alive() -> None:
    checks = []

    def is_alive() -> bool:
        checks.append(1)
        return len(checks) < 3

    await asyncio.wait_for(wait_for_engine_death(is_alive, poll_seconds=0.01), timeout=5)
    assert len(checks) == 3


async def test_the_watch_keeps_waiting_while_the_engine_lives() -> None:
    watch = asyncio.create_task(wait_for_engine_death(lambda: True, poll_seconds=0.01))
    await asyncio.sleep(0.1)
    assert not watch.done()
    watch.cancel()
