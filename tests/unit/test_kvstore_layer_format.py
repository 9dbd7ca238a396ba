"""8-bit layers for the slow tiers: size, accuracy, damage detection, and the tiers using them."""

from pathlib import Path

import pytest
import torch

from engine.kvstore import codec
from engine.kvstore.codec import CorruptEntry
from engine.kvstore.disk import DiskTier
from engine.kvstore.entry import ChunkKV
from engine.kvstore.layer_format import LayerFormat, layer_nbytes
from engine.kvstore.store import ChunkKVStore
from tests.unit.kv_entries import SECRET, expect, key_of, mac_for, same

INT8 = LayerFormat.INT8


def realistic_entry(tokens: int = 64, seed: int = 0) -> ChunkKV:
    """bf16 KV shaped like a small model's, keys with two outlier channels as real keys have."""
    gen = torch.Generator().manual_seed(seed)
    shape = (4, tokens, 2, 64)
    keys = torch.randn(shape, generator=gen)
    keys[..., 5] *= 40
    keys[..., 17] *= 15
    values = torch.randn(shape, generator=gen)
    token_ids = list(range(seed * tokens, (seed + 1) * tokens))
    return ChunkKV(keys.to(torch.bfloat16), values.to(torch.bfloat16), token_ids)


def relative_error(approximate: torch.Tensor, exact: torch.Tensor) -> float:
    difference = (approximate.float() - exact.float()).norm()
    return float(difference / exact.float().norm())


def per_channel_error(approximate: torch.Tensor, exact: torch.Tensor) -> torch.Tensor:
    """Relative error of every (head, dim) channel, over layers and tokens."""
    difference = (approximate.float() - exact.float()).norm(dim=(0, 1))
    return difference / exact.float().norm(dim=(0, 1))


def test_int8_takes_about_half_the_bytes_of_bf16_per_token() -> None:
    tokens, heads, dim = 384, 2, 64  # a 384-token chunk of Qwen2.5 0.5B
    raw = layer_nbytes(LayerFormat.RAW, torch.bfloat16, tokens, heads, dim)
    int8 = layer_nbytes(INT8, torch.bfloat16, tokens, heads, dim)
    assert raw / tokens == 512 and int8 / tokens == pytest.approx(265.3, abs=0.1)
    entry = realistic_entry(tokens=384)
    stored = len(entry.to_bytes(mac_for(entry), INT8))
    assert stored == entry.encoded_nbytes(INT8) < 0.53 * entry.encoded_nbytes()


def test_int8_round_trip_is_close_in_every_channel_despite_outliers() -> None:
    entry = realistic_entry()
    back = ChunkKV.from_bytes(entry.to_bytes(mac_for(entry), INT8), mac_for(entry))
    assert back.dtype == torch.bfloat16 and back.token_ids == entry.token_ids
    assert relative_error(back.keys, entry.keys) < 0.01
    assert relative_error(back.values, entry.values) < 0.01
    # One scale per channel: the ordinary channels keep their precision next to the outliers.
    assert float(per_channel_error(back.keys, entry.keys).max()) < 0.01


def test_all_zero_slices_stay_zero() -> None:
    entry = realistic_entry()
    keys, values = entry.keys.clone(), entry.values.clone()
    keys[:, :, :, 3] = 0
    values[:, 7] = 0
    zeros = ChunkKV(keys, values, entry.token_ids)
    back = ChunkKV.from_bytes(zeros.to_bytes(mac_for(zeros), INT8), mac_for(zeros))
    assert not back.keys[:, :, :, 3].any() and not back.values[:, 7].any()
    assert torch.isfinite(back.keys.float()).all() and torch.isfinite(back.values.float()).all()


@pytest.mark.parametrize("where", ["quantized", "scales"])
def test_a_damaged_int8_layer_fails_its_mac(where: str) -> None:
    entry = realistic_entry()
    data = bytearray(entry.to_bytes(mac_for(entry), INT8))
    data[-1 if where == "scales" else entry.encoded_nbytes(INT8) // 2] ^= 0x04
    with pytest.raises(CorruptEntry, match="MAC"):
        ChunkKV.from_bytes(bytes(data), mac_for(entry))


def test_fp8_entries_stay_exact() -> None:
    entry = realistic_entry()
    fp8 = ChunkKV(
        entry.keys.to(torch.float8_e4m3fn), entry.values.to(torch.float8_e4m3fn), entry.token_ids
    )
    back = ChunkKV.from_bytes(fp8.to_bytes(mac_for(fp8), INT8), mac_for(fp8))
    assert torch.equal(back.keys.view(torch.uint8), fp8.keys.view(torch.uint8))


def test_entries_of_format_version_2_are_still_read(monkeypatch: pytest.MonkeyPatch) -> None:
    entry = realistic_entry()
    monkeypatch.setattr(codec, "FORMAT_VERSION", 2)
    written_before = entry.to_bytes(mac_for(entry))
    monkeypatch.undo()
    assert written_before[4:6] == b"\x02\x00"
    assert same(ChunkKV.from_bytes(written_before, mac_for(entry)), entry)


def test_a_disk_store_writing_int8_serves_close_kv_and_reads_raw_entries_too(
    tmp_path: Path,
) -> None:
    old, new = realistic_entry(seed=1), realistic_entry(seed=2)
    DiskTier(tmp_path, SECRET).put(key_of(old), old)  # written raw before the switch
    with ChunkKVStore.create(1, tmp_path, secret=SECRET, layer_format=INT8) as store:
        store.put(key_of(new), new)  # the memory tier (1 byte) cannot hold it
        store.flush()
        assert same(store.get(key_of(old), expect(old)), old)
        stream = store.open_layers(key_of(new), expect(new))
        assert stream is not None
        for index, k, v in stream:
            assert relative_error(k, new.keys[index]) < 0.01
            assert relative_error(v, new.values[index]) < 0.01
    assert (tmp_path / f"{key_of(new)}.kv").stat().st_size == new.encoded_nbytes(INT8)
