"""format_exact: a stored entry round-tripped through a format, compared bit for bit."""

from __future__ import annotations

from pathlib import Path

import torch

from engine.kvstore.disk import DiskTier
from engine.kvstore.layer_format import LayerFormat
from load_tests.eval.format_exact import compare_store
from tests.unit.kv_entries import SECRET, key_of, make_entry


def _store(directory: Path) -> None:
    tier = DiskTier(directory, SECRET, layer_format=LayerFormat.RAW)
    special = make_entry(7, layers=2, tokens=8)
    special.keys[0, 0, 0, :4] = torch.tensor([float("nan"), -0.0, float("inf"), 1e-40])
    for entry in (make_entry(1, tokens=16), make_entry(2, tokens=5), special):
        tier.put(key_of(entry), entry)
    tier.close()


def test_lossless_gives_back_every_stored_bit(tmp_path: Path) -> None:
    _store(tmp_path)
    result = compare_store(tmp_path, SECRET, LayerFormat.LOSSLESS)
    assert result["entries"] == result["bit_exact_entries"] == 3
    assert result["differing"] == []
    assert result["tokens"] == 16 + 5 + 8


def test_int8_is_caught_changing_bits(tmp_path: Path) -> None:
    _store(tmp_path)
    result = compare_store(tmp_path, SECRET, LayerFormat.INT8)
    assert result["entries"] == 3
    assert result["bit_exact_entries"] < 3
    assert len(result["differing"]) == 3 - result["bit_exact_entries"]
