"""OutageGuard: one warning per outage, calls skipped between retries, one probe, growing waits."""

import logging

import pytest

from engine.kvstore.counters import Counters
from engine.kvstore.outage import OutageGuard

LOGGER = logging.getLogger("test.outage")


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def counters() -> Counters:
    return Counters("errors")


@pytest.fixture
def guard(clock: Clock, counters: Counters) -> OutageGuard:
    return OutageGuard("tier", LOGGER, counters, first_retry_s=1.0, max_retry_s=4.0, clock=clock)


def warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]


def test_a_healthy_backend_is_always_called(guard: OutageGuard) -> None:
    assert all(guard.available() for _ in range(3))


def test_an_outage_warns_once_and_skips_calls_until_the_retry(
    guard: OutageGuard, clock: Clock, counters: Counters, caplog: pytest.LogCaptureFixture
) -> None:
    guard.failed(ConnectionError("refused"))
    assert not guard.available()
    clock.now += 0.9
    assert not guard.available()
    clock.now += 0.2
    assert guard.available()  # this caller probes ...
    assert not guard.available()  # ... and nobody else meanwhile
    guard.failed(ConnectionError("refused"))
    assert counters.snapshot()["errors"] == 2
    assert len(warnings(caplog)) == 1 and "refused" in warnings(caplog)[0]


def test_waits_double_up_to_the_ceiling(guard: OutageGuard, clock: Clock) -> None:
    waits = []
    guard.failed(TimeoutError())
    for _ in range(5):
        waited = 0.0
        while not guard.available():
            clock.now += 0.5
            waited += 0.5
        waits.append(waited)
        guard.failed(TimeoutError())
    assert waits == [1.0, 2.0, 4.0, 4.0, 4.0]


def test_recovery_is_logged_and_resets_the_wait(
    guard: OutageGuard, clock: Clock, caplog: pytest.LogCaptureFixture
) -> None:
    guard.failed(TimeoutError("slow"))
    clock.now += 1.0
    guard.available()
    guard.failed(TimeoutError("slow"))  # next wait: 2 s
    clock.now += 2.0
    assert guard.available()
    guard.succeeded()
    assert all(guard.available() for _ in range(3))
    guard.failed(TimeoutError("slow again"))  # a new outage: warned, first wait again
    clock.now += 1.0
    assert guard.available()
    messages = warnings(caplog)
    assert len(messages) == 3 and "back" in messages[1] and "slow again" in messages[2]
