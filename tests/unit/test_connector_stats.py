"""Worker -> front end statistics travel over a socket only the running engine holds."""

from __future__ import annotations

import asyncio
import uuid

import pytest

from engine.connector.stats import StatsInbox, StatsOutbox
from engine.contract import BlendStats, StoreEvictions

STATS = BlendStats("blend", 90, 30, 3, 0, 12)


def test_posted_statistics_are_collected_once_per_request() -> None:
    channel = uuid.uuid4().hex
    inbox, outbox = StatsInbox(channel), StatsOutbox(channel)
    try:
        outbox.post("req-1", STATS)
        outbox.post("req-2", BlendStats("reuse", 1, 0, 1, 0, 0))
        assert inbox.collect("req-1") == STATS
        assert inbox.collect("req-1") is None
        assert inbox.collect("req-2").mode == "reuse"
        assert inbox.collect("never-blended") is None
    finally:
        inbox.close()
        outbox.close()


def test_posting_without_a_front_end_loses_the_message_but_never_raises() -> None:
    outbox = StatsOutbox(uuid.uuid4().hex)
    outbox.post("req-1", STATS)
    outbox.post("req-2", STATS)
    outbox.close()


def test_a_malformed_message_is_dropped_and_the_channel_keeps_working() -> None:
    import socket

    channel = uuid.uuid4().hex
    inbox = StatsInbox(channel)
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as stranger:
        stranger.sendto(b"{not json", f"\0ragblend-stats-{channel}")
        stranger.sendto(b'{"request_id": "x"}', f"\0ragblend-stats-{channel}")
    outbox = StatsOutbox(channel)
    outbox.post("req-1", STATS)
    assert inbox.collect("req-1") == STATS
    inbox.close()
    outbox.close()


def test_two_engines_cannot_share_a_channel() -> None:
    channel = uuid.uuid4().hex
    first = StatsInbox(channel)
    with pytest.raises(OSError):
        StatsInbox(channel)
    first.close()
    StatsInbox(channel).close()  # the name is free again once its engine is gone


def test_a_watched_inbox_drains_a_burst_larger_than_the_socket_holds() -> None:
    """The front end reads as messages arrive, not only when requests finish: a burst of
    blended requests never fills the socket, so no statistics are lost."""
    channel = uuid.uuid4().hex
    big = BlendStats("blend", 90, 30, 3, 0, 12, chunk_keys=tuple(f"{i:064x}" for i in range(400)))
    inbox, outbox = StatsInbox(channel), StatsOutbox(channel)

    async def burst() -> None:
        inbox.watch()
        for start in range(0, 400, 40):  # one engine step scheduling 40 blended requests
            await asyncio.to_thread(
                lambda start=start: [outbox.post(f"req-{i}", big) for i in range(start, start + 40)]
            )

    try:
        asyncio.run(burst())
        assert all(inbox.collect(f"req-{index}") == big for index in range(400))
    finally:
        inbox.close()
        outbox.close()


def test_an_eviction_between_requests_reaches_the_front_end_without_a_request() -> None:
    """The disk tier evicts as its writer stores a newer entry, after that entry's request has
    posted its statistics: the worker posts the loss then, and a later request's statistics do
    not repeat it."""
    import tempfile
    import threading

    from engine.connector.report import Reporter
    from engine.kvstore.disk import DiskTier
    from engine.kvstore.memory import MemoryTier
    from engine.kvstore.store import ChunkKVStore
    from tests.unit.kv_entries import SECRET, key_of, make_entry

    first, second = make_entry(0), make_entry(1)
    channel = uuid.uuid4().hex
    arrived: list[StoreEvictions] = []
    received = threading.Event()

    def on_evictions(evictions: StoreEvictions) -> None:
        arrived.append(evictions)
        received.set()

    inbox = StatsInbox(channel, on_evictions)
    with tempfile.TemporaryDirectory() as folder:
        disk = DiskTier(folder, SECRET, capacity_bytes=int(1.5 * first.nbytes))
        store = ChunkKVStore(MemoryTier(first.nbytes // 2), disk)
        reporter = Reporter(store, StatsOutbox(channel))
        store.after_backing_write(reporter.evictions)
        try:
            for number, entry in enumerate((first, second)):
                reporter.job(f"req-{number}", STATS)  # posted before the writer stores it
                store.put(key_of(entry), entry)
                store.flush()
            inbox.drain()
            assert received.is_set()
            assert [evictions.evicted_keys for evictions in arrived] == [(key_of(first),)]
            assert arrived[0].store["disk_entries"] == 1
            reporter.job("req-2", STATS)
            assert all(inbox.collect(f"req-{n}").evicted_keys == () for n in range(3))
        finally:
            store.close()
            reporter.close()
            inbox.close()
