"""ChunkKV: exact round trips, layer-wise reading, corruption and forgery detection."""

import io

import pytest
import torch

from engine.kvstore.codec import CorruptEntry, EntryReader, UntrustedEntry
from engine.kvstore.entry import ChunkKV
from engine.kvstore.mac import EntryMac
from tests.unit import kv_entries
from tests.unit.kv_entries import OTHER_SECRET, SECRET

MAC = EntryMac(SECRET, "a" * 64)

DTYPES = [torch.bfloat16, torch.float32, torch.float16, torch.float8_e4m3fn]


def make_entry(seed: int = 0, dtype: torch.dtype = torch.bfloat16, layers: int = 3) -> ChunkKV:
    gen = torch.Generator().manual_seed(seed)
    shape = (layers, 5, 2, 8)
    keys = (torch.randn(shape, generator=gen) * 3).to(dtype)
    values = (torch.randn(shape, generator=gen) * 3).to(dtype)
    return ChunkKV(keys, values, list(range(100 + seed, 105 + seed)))


def exactly_equal(a: ChunkKV, b: ChunkKV) -> bool:
    # Compare raw bits so the check is exact for every dtype (fp8 has no torch.equal kernel).
    bits_equal = all(
        torch.equal(x.view(torch.uint8), y.view(torch.uint8))
        for x, y in ((a.keys, b.keys), (a.values, b.values))
    )
    return a.keys.dtype == b.keys.dtype and bits_equal and a.token_ids == b.token_ids


@pytest.mark.parametrize("dtype", DTYPES)
def test_round_trip_is_exact(dtype: torch.dtype) -> None:
    entry = make_entry(dtype=dtype)
    data = entry.to_bytes(MAC)
    back = ChunkKV.from_bytes(data, MAC)
    assert len(data) == entry.encoded_nbytes()
    assert exactly_equal(back, entry)
    if dtype != torch.float8_e4m3fn:
        assert torch.equal(back.keys, entry.keys) and torch.equal(back.values, entry.values)


def test_non_contiguous_tensors_serialize_their_logical_values() -> None:
    base = make_entry(dtype=torch.float32)
    keys = base.keys.transpose(2, 3).contiguous().transpose(2, 3)
    entry = ChunkKV(keys, base.values, base.token_ids)
    assert not keys.is_contiguous()
    assert torch.equal(ChunkKV.from_bytes(entry.to_bytes(MAC), MAC).keys, base.keys)


def test_properties_and_layer_access() -> None:
    entry = make_entry(dtype=torch.float32, layers=4)
    assert (entry.num_layers, entry.num_tokens) == (4, 5)
    assert entry.nbytes == 2 * 4 * 5 * 2 * 8 * 4
    k, v = entry.layer(2)
    assert torch.equal(k, entry.keys[2]) and torch.equal(v, entry.values[2])


def test_one_layer_decodes_without_the_others() -> None:
    entry = make_entry(layers=4)
    data = bytearray(entry.to_bytes(MAC))
    reader = EntryReader(io.BytesIO(bytes(data)), len(data), MAC)
    first_layer_at = reader.header.layer_offset(0)
    data[first_layer_at + 3] ^= 0xFF  # damage layer 0 only
    reader = EntryReader(io.BytesIO(bytes(data)), len(data), MAC)
    k, v = reader.read_layer(3)
    assert torch.equal(k, entry.keys[3]) and torch.equal(v, entry.values[3])
    with pytest.raises(CorruptEntry, match="layer 0"):
        reader.read_layer(0)


def test_header_records_geometry_and_token_ids() -> None:
    entry = make_entry(dtype=torch.float16, layers=2)
    reader = EntryReader(io.BytesIO(entry.to_bytes(MAC)), entry.encoded_nbytes(), MAC)
    header = reader.header
    assert header.dtype == torch.float16
    assert (header.num_layers, header.num_tokens, header.num_kv_heads, header.head_dim) == (
        2,
        5,
        2,
        8,
    )
    assert header.token_ids == entry.token_ids
    assert header.total_nbytes == entry.encoded_nbytes()


@pytest.mark.parametrize("position", [0, 10, 40, 0.5, -1])
def test_any_flipped_byte_is_detected(position: float) -> None:
    data = bytearray(make_entry().to_bytes(MAC))
    index = int(position * len(data)) if isinstance(position, float) else position
    data[index] ^= 0x01
    with pytest.raises(CorruptEntry):
        ChunkKV.from_bytes(bytes(data), MAC)


@pytest.mark.parametrize("keep", [0, 10, 100, -1])
def test_truncated_bytes_are_detected(keep: int) -> None:
    data = make_entry().to_bytes(MAC)
    with pytest.raises(CorruptEntry):
        ChunkKV.from_bytes(data[:keep], MAC)


def test_foreign_bytes_are_rejected() -> None:
    with pytest.raises(CorruptEntry, match="magic"):
        ChunkKV.from_bytes(b"\x80\x04pickle" * 10, MAC)


def test_inconsistent_entries_are_refused() -> None:
    entry = make_entry()
    with pytest.raises(ValueError):
        ChunkKV(entry.keys, entry.values[:, :4], entry.token_ids)
    with pytest.raises(ValueError):
        ChunkKV(entry.keys, entry.values, entry.token_ids[:-1])
    with pytest.raises(TypeError):
        ChunkKV(entry.keys.to(torch.int32), entry.values.to(torch.int32), entry.token_ids)
    with pytest.raises(TypeError):
        ChunkKV(entry.keys, entry.values.float(), entry.token_ids)


def test_an_entry_written_with_another_secret_is_untrusted() -> None:
    entry = kv_entries.make_entry(0)
    data = entry.to_bytes(kv_entries.mac_for(entry, OTHER_SECRET))
    with pytest.raises(UntrustedEntry, match="another secret"):
        ChunkKV.from_bytes(data, kv_entries.mac_for(entry))


def test_an_entry_of_the_old_unkeyed_format_is_untrusted() -> None:
    entry = kv_entries.make_entry(0)
    with pytest.raises(UntrustedEntry, match="format version 1"):
        ChunkKV.from_bytes(kv_entries.old_format_bytes(entry), kv_entries.mac_for(entry))


@pytest.mark.parametrize("zero", [False, True], ids=["same-kv", "zeroed-kv"])
def test_an_entry_forged_with_unkeyed_checksums_fails_its_mac(zero: bool) -> None:
    entry = kv_entries.make_entry(0)
    forged = kv_entries.forged_bytes(kv_entries.zeroed(entry) if zero else entry)
    with pytest.raises(CorruptEntry, match="header MAC") as raised:
        ChunkKV.from_bytes(forged, kv_entries.mac_for(entry))
    assert not isinstance(raised.value, UntrustedEntry)


def test_an_entry_is_valid_only_under_the_key_it_was_written_for() -> None:
    entry, other = kv_entries.make_entry(0), kv_entries.make_entry(1)
    data = entry.to_bytes(kv_entries.mac_for(entry))
    assert kv_entries.same(ChunkKV.from_bytes(data, kv_entries.mac_for(entry)), entry)
    with pytest.raises(CorruptEntry, match="header MAC"):
        ChunkKV.from_bytes(data, kv_entries.mac_for(other))
