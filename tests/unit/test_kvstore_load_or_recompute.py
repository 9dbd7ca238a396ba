"""Load or recompute: tiers measure themselves, and a Redis behind a slow link is skipped."""

from collections.abc import Iterator
from pathlib import Path

import pytest

from engine.connector.metadata import BlendJob
from engine.connector.placement import ChunkPlacer
from engine.connector.ranks import RankGroup
from engine.contract import BlendPlan, ChunkSpan, Recipe
from engine.kvstore.load_meter import ComputeRate, LoadMeter, LoadOrRecompute
from engine.kvstore.memory import MemoryTier
from engine.kvstore.redis_tier import RedisTier
from engine.kvstore.store import ChunkKVStore
from tests.redis_server import LatencyProxy, running_redis
from tests.unit.kv_entries import SECRET, expect, key_of, make_entry

ENTRY = make_entry(0, layers=12, tokens=512)  # 32 KiB layers, read one round trip each
KEY = key_of(ENTRY)
RECOMPUTE_S = 1.5
"""What computing the chunk is taken to cost: far above a loopback load (under a millisecond a
round trip, up to about a hundred on a starved machine), far below one through the proxy at 200
ms a round trip (13 round trips: 2.6 s)."""
ATTEMPTS = 200


def test_a_meter_estimates_the_larger_of_round_trips_and_bytes_over_bandwidth() -> None:
    meter = LoadMeter()
    assert meter.estimate(1000, 1) is None
    meter.round_trip(0.010)
    meter.transfer(1_000_000, 0.100)  # 1 MB in 100 ms, its round trip included: 10 MB/s
    assert meter.snapshot() == {"latency_us": 10_000, "bytes_per_s": 10_000_000}
    assert meter.estimate(2_000_000, 3) == pytest.approx(0.200)  # bandwidth-bound
    assert meter.estimate(10_000, 3) == pytest.approx(0.030)  # latency-bound


def test_estimates_scale_nominal_sizes_by_what_entries_really_take() -> None:
    """A lossless entry takes about 0.68 of its uncoded size: its load costs that share."""
    meter = LoadMeter()
    meter.round_trip(0.001)
    meter.transfer(1_000_000, 0.100)
    assert meter.estimate(2_000_000, 1) == pytest.approx(0.200)
    meter.entry_size(675, 1000)
    assert meter.estimate(2_000_000, 1) == pytest.approx(0.135)


def test_a_layer_read_as_quick_as_the_header_is_no_infinitely_fast_link() -> None:
    """Loopback: a 192 KiB layer read takes no longer than the 64 KiB header round trip."""
    meter = LoadMeter()
    meter.round_trip(0.000_400)
    for _ in range(24):
        meter.transfer(196_608, 0.000_380)
    assert meter.snapshot()["bytes_per_s"] == round(196_608 / 0.000_380)  # ~0.5 GB/s
    assert meter.estimate(24 * 196_608, 25) == pytest.approx(25 * 0.000_400)


def test_a_meter_averages_slowdowns_and_adopts_a_recovery_at_once() -> None:
    meter = LoadMeter()
    meter.round_trip(0.010)
    meter.round_trip(0.060)  # a slow reading is averaged in: 0.8 x 10 ms + 0.2 x 60 ms
    assert meter.snapshot()["latency_us"] == 20_000
    meter.round_trip(0.001)  # twenty times better: the link recovered
    assert meter.snapshot()["latency_us"] == 1_000
    meter.transfer(1000, 0.001)
    meter.transfer(1000, 0.006)  # a slow read is averaged in seconds per byte
    assert meter.snapshot()["bytes_per_s"] == 500_000
    meter.transfer(1000, 0.000_1)
    assert meter.snapshot()["bytes_per_s"] == 10_000_000


def test_the_decision_loads_unless_known_slower_and_probes_a_slow_tier() -> None:
    decision = LoadOrRecompute(probe_every=4)
    assert decision.should_load("redis", None, 0.1)
    assert decision.should_load("redis", 0.5, None)
    assert decision.should_load("redis", 0.05, 0.1)
    slow = [decision.should_load("redis", 0.5, 0.1) for _ in range(8)]
    assert slow == [False, False, False, True] * 2


def test_the_compute_rate_scales_with_tokens() -> None:
    rate = ComputeRate()
    assert rate.seconds_for(100) is None
    rate.record(0.2, 100)
    rate.record(1.0, 0)  # nothing computed: no information
    assert rate.seconds_for(50) == pytest.approx(0.1)


@pytest.fixture
def proxied_store(tmp_path: Path) -> Iterator[tuple[ChunkKVStore, LatencyProxy]]:
    with running_redis(tmp_path / "redis") as server:
        proxy = LatencyProxy(server.port)
        tier = RedisTier(proxy.url, SECRET, timeout_s=5.0)
        with ChunkKVStore(MemoryTier(1 << 30), tier) as store:
            store.put(KEY, ENTRY)
            store.flush()
            yield store, proxy
        proxy.close()


def load(store: ChunkKVStore) -> bool:
    """Look the entry up past memory, as a worker would; whether it was loaded (and read)."""
    store.memory.delete(KEY)
    stream = store.open_layers(KEY, expect(ENTRY), RECOMPUTE_S)
    if stream is None:
        return False
    with stream:
        assert len(list(stream)) == ENTRY.num_layers
    return True


def test_a_slowed_redis_is_computed_instead_and_loaded_again_once_fast(
    proxied_store: tuple[ChunkKVStore, LatencyProxy],
) -> None:
    store, proxy = proxied_store
    assert load(store) and load(store)  # fast: loaded, and measured
    assert store.backing[0].load_seconds(expect(ENTRY)) < RECOMPUTE_S
    proxy.delay_s = 0.2
    assert load(store)  # the estimate still says fast; this load measures the slow link
    assert store.backing[0].load_seconds(expect(ENTRY)) > RECOMPUTE_S
    assert not load(store)  # switched: the chunk is computed instead
    assert store.stats()["recomputed_instead"] == 1
    proxy.delay_s = 0.0
    switched_back = next((n for n in range(ATTEMPTS) if load(store)), None)
    assert switched_back is not None and switched_back < 16  # the first probe saw it fast
    assert all(load(store) for _ in range(3))


def test_redis_bandwidth_is_bytes_over_the_seconds_of_real_reads(
    proxied_store: tuple[ChunkKVStore, LatencyProxy],
) -> None:
    """Every read through the proxy takes at least its delay, so no honest meter can claim more
    than a layer per delay, however busy the machine (which only makes reads slower)."""
    store, proxy = proxied_store
    proxy.delay_s = 0.05
    assert load(store)
    measured = store.backing[0].stats()
    layer_bytes = ENTRY.nbytes // ENTRY.num_layers
    assert 0 < measured["bytes_per_s"] <= layer_bytes / proxy.delay_s
    assert measured["latency_us"] >= 50_000
    assert store.backing[0].load_seconds(expect(ENTRY)) >= (1 + ENTRY.num_layers) * 0.05


def test_without_a_compute_rate_the_placer_loads_a_hit_however_slow_its_tier(
    proxied_store: tuple[ChunkKVStore, LatencyProxy],
) -> None:
    """`RAGBLEND_CHUNK_CACHE_RECOMPUTE_WHEN_FASTER=false` hands the worker's placer no compute
    rate: a Redis hit measured slower than computing is loaded all the same."""
    store, proxy = proxied_store
    assert load(store)
    proxy.delay_s = 0.2
    assert load(store)  # this load measures the slow link
    rate = ComputeRate()
    rate.record(RECOMPUTE_S, ENTRY.num_tokens)
    prompt = [0, *ENTRY.token_ids, 7]
    plan = BlendPlan(Recipe("blend", 0.2), (ChunkSpan(1, 1 + ENTRY.num_tokens),))
    job = BlendJob("r", plan, prompt, 0, len(prompt) - 1, [0])
    for compute_rate, hits in ((rate, 0), (None, 1)):
        store.memory.delete(KEY)
        placer = ChunkPlacer(store, RankGroup(), compute_rate, 1, lambda _: expect(ENTRY))
        placement = placer.place(job, "test-model", reusable=True, unreadable=set())
        assert len(placement.hits) == hits
        for hit in placement.hits:
            assert len(list(hit.layers)) == ENTRY.num_layers
