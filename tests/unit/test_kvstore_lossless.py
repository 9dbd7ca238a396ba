"""The lossless slow-tier format: bit-exact, smaller than raw, and damage is a miss."""

import io
from pathlib import Path

import pytest
import torch

from engine.kvstore.codec import CorruptEntry, EntryReader
from engine.kvstore.disk import DiskTier
from engine.kvstore.entry import ChunkKV
from engine.kvstore.layer_format import LayerFormat, decode_layer, encode_layer
from engine.kvstore.store import ChunkKVStore
from tests.redis_server import running_redis
from tests.unit.kv_entries import SECRET, expect, key_of, mac_for
from tests.unit.test_kvstore_layer_format import realistic_entry

LOSSLESS = LayerFormat.LOSSLESS
_BITS = {torch.bfloat16: torch.int16, torch.float16: torch.int16, torch.float32: torch.int32}


def special_values_entry(dtype: torch.dtype, tokens: int, heads: int, dim: int) -> ChunkKV:
    """Random KV with inf, -inf, nan, -0.0, subnormals and extremes sprinkled through it."""
    gen = torch.Generator().manual_seed(tokens * 100 + dim)
    shape = (2, tokens, heads, dim)
    keys = torch.randn(shape, generator=gen).to(dtype)
    values = (torch.randn(shape, generator=gen) * 1e3).to(dtype)
    info = torch.finfo(dtype)
    specials = [float("inf"), float("-inf"), float("nan"), -0.0, info.tiny / 4, info.max, info.min]
    flat = keys.view(-1)
    for position, special in enumerate(specials):
        flat[(position * 7) % flat.numel()] = special
    values.view(-1)[-1] = float("nan")
    return ChunkKV(keys, values, list(range(tokens)))


def same_bits(a: torch.Tensor, b: torch.Tensor) -> bool:
    return torch.equal(a.view(_BITS[a.dtype]), b.view(_BITS[b.dtype]))


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32])
@pytest.mark.parametrize(("tokens", "heads", "dim"), [(1, 1, 1), (3, 1, 5), (7, 2, 3), (33, 2, 8)])
def test_every_bit_comes_back(dtype: torch.dtype, tokens: int, heads: int, dim: int) -> None:
    entry = special_values_entry(dtype, tokens, heads, dim)
    data = entry.to_bytes(mac_for(entry), LOSSLESS)
    back = ChunkKV.from_bytes(data, mac_for(entry))
    assert back.dtype == dtype and back.token_ids == entry.token_ids
    assert same_bits(back.keys, entry.keys) and same_bits(back.values, entry.values)


def test_kv_like_values_take_under_three_quarters_of_raw() -> None:
    entry = realistic_entry(tokens=384)
    coded = entry.to_bytes(mac_for(entry), LOSSLESS)
    assert len(coded) < 0.75 * entry.encoded_nbytes(LayerFormat.RAW)
    assert entry.encoded_nbytes(LOSSLESS) == entry.encoded_nbytes(LayerFormat.RAW)  # the bound


def test_layers_of_different_sizes_are_read_one_by_one() -> None:
    entry = realistic_entry(tokens=64)
    keys = entry.keys.clone()
    keys[1] = 0  # one layer compresses to almost nothing
    varied = ChunkKV(keys, entry.values, entry.token_ids)
    data = varied.to_bytes(mac_for(varied), LOSSLESS)
    reader = EntryReader(io.BytesIO(data), len(data), mac_for(varied))
    assert len(set(reader.header.layer_lengths)) > 1
    for index in reversed(range(varied.num_layers)):  # any order: the table has the offsets
        k, v = reader.read_layer(index)
        assert same_bits(k, varied.keys[index]) and same_bits(v, varied.values[index])


@pytest.mark.parametrize("where", ["header", "low plane", "coded top plane", "cut short"])
def test_a_damaged_entry_is_refused(where: str) -> None:
    entry = realistic_entry()
    data = bytearray(entry.to_bytes(mac_for(entry), LOSSLESS))
    header = EntryReader(io.BytesIO(data), len(data), mac_for(entry)).header
    if where == "cut short":
        data = data[:-1]
    else:
        offset = {"header": 40, "low plane": header.header_nbytes + 10, "coded top plane": -3}
        data[offset[where]] ^= 0x10
    with pytest.raises(CorruptEntry):
        ChunkKV.from_bytes(bytes(data), mac_for(entry))


def test_an_undecodable_plane_is_a_value_error_not_a_crash() -> None:
    entry = realistic_entry(tokens=4)
    low, frame = encode_layer(LOSSLESS, *entry.layer(0))
    for broken in (frame[:-4], frame[:4], bytes(len(frame))):
        with pytest.raises(ValueError, match="plane"):
            raw = bytearray(low.tobytes() + bytes(broken))
            decode_layer(LOSSLESS, raw, torch.bfloat16, 4, 2, 64)


def test_a_damaged_file_on_disk_is_a_miss_and_deleted(tmp_path: Path) -> None:
    entry = realistic_entry()
    tier = DiskTier(tmp_path, SECRET, layer_format=LOSSLESS)
    tier.put(key_of(entry), entry)
    path = tmp_path / f"{key_of(entry)}.kv"
    assert tier.stats()["bytes"] == path.stat().st_size < entry.encoded_nbytes()
    data = bytearray(path.read_bytes())
    data[-2] ^= 0x01
    path.write_bytes(bytes(data))
    assert tier.get(key_of(entry)) is None
    assert tier.stats()["corrupt"] == 1 and not path.exists()


def test_a_store_on_redis_and_disk_serves_exact_kv_from_either(tmp_path: Path) -> None:
    entry = realistic_entry(seed=3)
    with (
        running_redis(tmp_path / "redis") as server,
        ChunkKVStore.create(
            1, tmp_path / "disk", secret=SECRET, redis_url=server.url, layer_format=LOSSLESS
        ) as store,
    ):
        store.put(key_of(entry), entry)
        store.flush()
        for tier in store.backing:
            stream = tier.load_layers(key_of(entry))
            assert stream is not None
            with stream:
                for index, k, v in stream:
                    assert same_bits(k, entry.keys[index])
                    assert same_bits(v, entry.values[index])
        assert store.get(key_of(entry), expect(entry)) is not None
