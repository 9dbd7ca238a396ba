"""Chunk keys and model fingerprints: stable, and sensitive to everything that changes the KV."""

import hashlib
import json
import struct

import numpy as np
import pytest
import torch

from engine.kvstore.keys import ChunkKey, model_fingerprint

MODEL = model_fingerprint("SmolLM2-360M-Instruct", "bfloat16", 32, 5, 64)
TOKENS = [1, 2, 3, 50256]


def test_same_model_and_tokens_give_the_same_key_for_any_sequence_type() -> None:
    key = ChunkKey.for_chunk(MODEL, TOKENS)
    assert ChunkKey.for_chunk(MODEL, tuple(TOKENS)) == key
    assert ChunkKey.for_chunk(MODEL, np.array(TOKENS, dtype=np.int32)) == key
    assert ChunkKey.for_chunk(MODEL, torch.tensor(TOKENS)) == key


@pytest.mark.parametrize(
    "tokens",
    [[1, 2, 3, 50257], [2, 1, 3, 50256], [1, 2, 3], [1, 2, 3, 50256, 0], [0, 1, 2, 3, 50256]],
)
def test_any_token_change_gives_a_different_key(tokens: list[int]) -> None:
    assert ChunkKey.for_chunk(MODEL, tokens) != ChunkKey.for_chunk(MODEL, TOKENS)


def test_a_different_model_gives_a_different_key() -> None:
    other = model_fingerprint("SmolLM2-360M-Instruct", "float32", 32, 5, 64)
    assert ChunkKey.for_chunk(other, TOKENS) != ChunkKey.for_chunk(MODEL, TOKENS)


@pytest.mark.parametrize(
    "changed",
    [
        ("SmolLM2-135M-Instruct", "bfloat16", 32, 5, 64, ""),
        ("SmolLM2-360M-Instruct", "float16", 32, 5, 64, ""),
        ("SmolLM2-360M-Instruct", "bfloat16", 30, 5, 64, ""),
        ("SmolLM2-360M-Instruct", "bfloat16", 32, 4, 64, ""),
        ("SmolLM2-360M-Instruct", "bfloat16", 32, 5, 128, ""),
        ("SmolLM2-360M-Instruct", "bfloat16", 32, 5, 64, "rev=abc"),
    ],
)
def test_every_fingerprint_field_matters(changed: tuple) -> None:
    assert model_fingerprint(*changed) != MODEL


def test_dtype_spellings_are_normalised() -> None:
    for spelling in ("bf16", "BFloat16", "torch.bfloat16", str(torch.bfloat16)):
        assert model_fingerprint("SmolLM2-360M-Instruct", spelling, 32, 5, 64) == MODEL


def test_key_follows_the_documented_encoding_and_never_drifts() -> None:
    """Changing the encoding would orphan every entry already on disk."""
    fields = ["SmolLM2-360M-Instruct", "bfloat16", 32, 5, 64, ""]
    model_bytes = json.dumps(fields, separators=(",", ":")).encode()
    model = hashlib.blake2b(model_bytes, digest_size=16, person=b"ragblend.model").hexdigest()
    digest = hashlib.blake2b(digest_size=32, person=b"ragblend.chunk")
    digest.update(struct.pack("<Q", len(model)) + model.encode())
    digest.update(struct.pack("<4q", *TOKENS))
    assert model == MODEL == "d2e5caa2779f3e4bbfe2e5676f4ffee6"
    expected = "a4fc848f71ec9c6de86fd2dcd55e3bf554a53041caca30e856fdfbe97f46a26d"
    assert ChunkKey.for_chunk(MODEL, TOKENS) == digest.hexdigest() == expected


def test_keys_are_hex_strings_and_validate_on_construction() -> None:
    key = ChunkKey.for_chunk(MODEL, TOKENS)
    assert isinstance(key, str) and len(key) == 64 and ChunkKey.is_valid(key)
    assert ChunkKey(str(key)) == key
    for bad in ("", "abc", key.upper(), key + "0", "../" + key[3:]):
        assert not ChunkKey.is_valid(bad)
        with pytest.raises(ValueError):
            ChunkKey(bad)


@pytest.mark.parametrize("tokens", [[], [[1, 2]], [-1, 2], [2**63]])
def test_invalid_token_ids_are_rejected(tokens: list) -> None:
    with pytest.raises(ValueError):
        ChunkKey.for_chunk(MODEL, tokens)


def test_non_integer_token_ids_are_rejected() -> None:
    with pytest.raises(TypeError):
        ChunkKey.for_chunk(MODEL, [1.0, 2.0])


def test_invalid_fingerprint_inputs_are_rejected() -> None:
    with pytest.raises(ValueError):
        model_fingerprint("m", "bfloat16", 0, 5, 64)
    with pytest.raises(ValueError):
        model_fingerprint("", "bfloat16", 32, 5, 64)
    with pytest.raises(ValueError):
        ChunkKey.for_chunk("", TOKENS)


def test_tensor_parallel_ranks_key_their_own_heads_apart() -> None:
    """A rank caches only its share of the heads: its entries load nowhere else."""
    args = ("SmolLM2-135M-Instruct", "bfloat16", 30, 1, 64)
    ranks = [model_fingerprint(*args, tp_rank=rank, tp_size=3) for rank in range(3)]
    other_split = model_fingerprint(*args, tp_rank=0, tp_size=2)
    unsplit = model_fingerprint(*args)
    assert len({*ranks, other_split, unsplit}) == 5
    assert model_fingerprint(*args, tp_rank=0, tp_size=1) == unsplit  # old keys stay valid
    with pytest.raises(ValueError, match="rank 3 of 3"):
        model_fingerprint(*args, tp_rank=3, tp_size=3)
