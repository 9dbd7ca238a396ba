"""Worker -> scheduler statistics travel over a socket only the running engine holds."""

from __future__ import annotations

import uuid

import pytest

from engine.connector.stats import StatsInbox, StatsOutbox, front_channel
from engine.contract import BlendStats

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


def test_posting_without_a_scheduler_loses_the_message_but_never_raises() -> None:
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


def test_the_front_end_gets_the_statistics_under_its_own_id() -> None:
    channel = uuid.uuid4().hex
    scheduler, front = StatsInbox(channel), StatsInbox(front_channel(channel))
    outbox = StatsOutbox(channel)
    try:
        outbox.post("req-1-a1b2c3d4", STATS, front_id="req-1")
        outbox.post("req-2-e5f6a7b8", STATS)  # a plan that names no front-end id
        assert scheduler.collect("req-1-a1b2c3d4") == STATS
        assert front.collect("req-1") == STATS
        assert scheduler.collect("req-2-e5f6a7b8") == STATS
        assert front.collect("req-2") is None
    finally:
        for socket_owner in (scheduler, front, outbox):
            socket_owner.close()


def test_a_finished_output_without_statistics_gets_the_workers_report() -> None:
    from types import SimpleNamespace

    from vllm import SamplingParams

    from engine.contract import PLAN_KEY, BlendPlan, ChunkSpan, stats_in
    from engine.front_stats import FrontStats

    channel = uuid.uuid4().hex
    front, outbox = FrontStats(channel), StatsOutbox(channel)
    try:
        shared = SamplingParams(extra_args=BlendPlan("blend", 0.2, (ChunkSpan(1, 5),)).extra_args())
        tagged = front.tag(shared, "req-1")
        plan = BlendPlan.from_params(tagged.extra_args["kv_transfer_params"])
        assert plan is not None and plan.stats_id == "req-1"
        assert "stats_id" not in shared.extra_args["kv_transfer_params"][PLAN_KEY]
        assert front.tag(SamplingParams(), "req-2").extra_args is None  # a full prefill: as is
        outbox.post("req-1-a1b2c3d4", STATS, front_id=plan.stats_id)
        ended_on_a_stop_string = SimpleNamespace(kv_transfer_params=None)
        assert front.settle(ended_on_a_stop_string, "req-1") == STATS
        assert stats_in(ended_on_a_stop_string.kv_transfer_params) == STATS
        outbox.post("req-3-a1b2c3d4", STATS, front_id="req-3")
        finished = SimpleNamespace(
            kv_transfer_params={"ragblend_stats": STATS.to_dict() | {"chunks_hit": 9}}
        )
        assert front.settle(finished, "req-3").chunks_hit == 9  # the scheduler's own wins
    finally:
        front.close()
        outbox.close()
