"""RoPE re-rotation against an explicit complex-number reference."""

import math

import pytest
import torch

from engine.blend.rope import (
    RopeSpec,
    UnsupportedRope,
    apply_rope,
    inv_freq,
    rotate,
    rotate_keys,
    rotation,
)

LLAMA3 = {
    "rope_type": "llama3",
    "factor": 8.0,
    "low_freq_factor": 1.0,
    "high_freq_factor": 4.0,
    "original_max_position_embeddings": 8192,
}


def reference_freqs(spec: RopeSpec) -> list[float]:
    """Plain RoPE frequencies, one per rotated pair, in float64."""
    return [spec.base ** (-2 * i / spec.rotary_dim) for i in range(spec.rotary_dim // 2)]


def reference_rope(x: torch.Tensor, positions: list[int], spec: RopeSpec) -> torch.Tensor:
    """Rotate each pair as a complex number z * exp(i * pos * freq), token by token, in float64."""
    out = x.double().clone()
    half = spec.rotary_dim // 2
    freqs = reference_freqs(spec)
    for t, pos in enumerate(positions):
        for i, freq in enumerate(freqs):
            a, b = (i, i + half) if spec.is_neox_style else (2 * i, 2 * i + 1)
            z = torch.complex(out[t, :, a], out[t, :, b]) * complex(
                math.cos(pos * freq), math.sin(pos * freq)
            )
            out[t, :, a], out[t, :, b] = z.real, z.imag
    return out


# fp32 rounds an angle of a few hundred radians by ~1e-5, so positions past ~200 get a looser atol.
FP32_FAR = {"atol": 5e-5, "rtol": 1e-5}


def keys(num_tokens: int = 24, heads: int = 3, head_dim: int = 64, seed: int = 0) -> torch.Tensor:
    return torch.randn(num_tokens, heads, head_dim, generator=torch.Generator().manual_seed(seed))


@pytest.mark.parametrize("neox", [True, False])
@pytest.mark.parametrize("rotary_dim", [64, 32])
def test_apply_rope_matches_complex_reference(neox: bool, rotary_dim: int) -> None:
    spec = RopeSpec(head_dim=64, rotary_dim=rotary_dim, base=10000.0, is_neox_style=neox)
    k = keys()
    positions = [3 * t + 1 for t in range(k.shape[0])]
    got = apply_rope(k, torch.tensor(positions), spec)
    torch.testing.assert_close(
        got.double(), reference_rope(k, positions, spec), atol=1e-5, rtol=1e-5
    )


@pytest.mark.parametrize("neox", [True, False])
def test_partial_rotary_leaves_tail_untouched(neox: bool) -> None:
    spec = RopeSpec(head_dim=64, rotary_dim=16, base=10000.0, is_neox_style=neox)
    k = keys()
    moved = rotate_keys(k, 500, spec)
    assert torch.equal(moved[..., 16:], k[..., 16:])
    assert not torch.allclose(moved[..., :16], k[..., :16])


def test_chunk_rotated_by_137_matches_rope_at_137() -> None:
    spec = RopeSpec(head_dim=64, rotary_dim=64, base=10000.0, is_neox_style=True)
    raw = keys(num_tokens=48)
    positions = torch.arange(48)
    cached = apply_rope(raw, positions, spec)
    torch.testing.assert_close(
        rotate_keys(cached, 137, spec), apply_rope(raw, positions + 137, spec), atol=1e-5, rtol=1e-5
    )
    expected = reference_rope(raw, (positions + 137).tolist(), spec)
    torch.testing.assert_close(
        rotate_keys(cached, 137, spec).double(), expected, atol=1e-5, rtol=1e-5
    )


@pytest.mark.parametrize("neox", [True, False])
def test_rotation_composes(neox: bool) -> None:
    spec = RopeSpec(head_dim=64, rotary_dim=48, base=500000.0, is_neox_style=neox, scaling=LLAMA3)
    k = keys()
    twice = rotate_keys(rotate_keys(k, 40, spec), 77, spec)
    torch.testing.assert_close(twice, rotate_keys(k, 117, spec), **FP32_FAR)
    back = rotate_keys(rotate_keys(k, 250, spec), -250, spec)
    torch.testing.assert_close(back, k, **FP32_FAR)


def test_per_token_delta() -> None:
    spec = RopeSpec(head_dim=64, rotary_dim=64, base=10000.0, is_neox_style=False)
    raw = keys(num_tokens=6)
    positions = torch.tensor([0, 1, 2, 0, 1, 2])
    delta = torch.tensor([10, 10, 10, 300, 300, 300])
    got = rotate_keys(apply_rope(raw, positions, spec), delta, spec)
    torch.testing.assert_close(got, apply_rope(raw, positions + delta, spec), **FP32_FAR)


def test_one_rotation_moves_every_layer_as_moving_each_chunk_alone() -> None:
    # A blend computes the chunks' rotation once and applies it to each layer's keys.
    spec = RopeSpec(head_dim=64, rotary_dim=64, base=10000.0, is_neox_style=True)
    first, second = keys(num_tokens=5).bfloat16(), keys(num_tokens=3).bfloat16()
    move = rotation(torch.tensor([40] * 5 + [-7] * 3), spec)
    for layer_scale in (1.0, 3.0):
        both = torch.cat((first, second)) * layer_scale
        expected = torch.cat((rotate_keys(first * layer_scale, 40, spec),
                              rotate_keys(second * layer_scale, -7, spec)))  # fmt: skip
        assert torch.equal(rotate(both, move), expected)
    with pytest.raises(ValueError, match="cannot move"):
        rotate(keys(num_tokens=4), move)


def test_bf16_stays_bf16_and_close() -> None:
    spec = RopeSpec(head_dim=64, rotary_dim=64, base=10000.0, is_neox_style=True)
    raw = keys(num_tokens=32)
    positions = torch.arange(32)
    cached = apply_rope(raw, positions, spec).bfloat16()
    moved = rotate_keys(cached, 1000, spec)
    assert moved.dtype == torch.bfloat16
    expected = apply_rope(raw, positions + 1000, spec)
    torch.testing.assert_close(moved.float(), expected, atol=3e-2, rtol=2e-2)


def test_llama3_scaling_matches_formula() -> None:
    spec = RopeSpec(head_dim=128, rotary_dim=128, base=500000.0, is_neox_style=True, scaling=LLAMA3)
    expected = []
    for freq in reference_freqs(spec):
        wavelen = 2 * math.pi / freq
        if wavelen < 8192 / 4.0:
            expected.append(freq)
        elif wavelen > 8192 / 1.0:
            expected.append(freq / 8.0)
        else:
            smooth = (8192 / wavelen - 1.0) / (4.0 - 1.0)
            expected.append((1 - smooth) * freq / 8.0 + smooth * freq)
    got = inv_freq(spec)
    assert got.dtype == torch.float32
    torch.testing.assert_close(
        got.double(), torch.tensor(expected, dtype=torch.float64), rtol=1e-6, atol=0
    )
    plain = inv_freq(RopeSpec(head_dim=128, rotary_dim=128, base=500000.0, is_neox_style=True))
    assert got[0] == plain[0] and torch.allclose(got[-1], plain[-1] / 8)


def test_linear_scaling_divides_frequencies() -> None:
    plain = RopeSpec(head_dim=32, rotary_dim=32, base=10000.0, is_neox_style=True)
    linear = RopeSpec(32, 32, 10000.0, True, scaling={"rope_type": "linear", "factor": 4.0})
    torch.testing.assert_close(inv_freq(linear), inv_freq(plain) / 4.0)
    default = RopeSpec(32, 32, 10000.0, True, scaling={"rope_type": "default", "rope_theta": 1e4})
    assert torch.equal(inv_freq(default), inv_freq(plain))


@pytest.mark.parametrize(
    "scaling",
    [
        {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 4096},
        {"type": "dynamic", "factor": 2.0},
        {"rope_type": "longrope", "short_factor": [1.0], "long_factor": [1.0]},
        {"type": "mrope", "mrope_section": [16, 24, 24]},
        {"rope_type": "default", "mrope_section": [16, 24, 24]},
        {"rope_type": "llama3", "factor": 8.0},
        {"rope_type": "linear"},
    ],
)
def test_unsupported_scaling_raises(scaling: dict) -> None:
    with pytest.raises(UnsupportedRope):
        RopeSpec(head_dim=64, rotary_dim=64, base=10000.0, is_neox_style=True, scaling=scaling)


@pytest.mark.parametrize("rotary_dim", [0, 33, 128])
def test_bad_rotary_dim_raises(rotary_dim: int) -> None:
    with pytest.raises(ValueError, match="rotary_dim"):
        RopeSpec(head_dim=64, rotary_dim=rotary_dim, base=10000.0, is_neox_style=True)


def test_bad_delta_raises() -> None:
    spec = RopeSpec(head_dim=64, rotary_dim=64, base=10000.0, is_neox_style=True)
    with pytest.raises(ValueError, match="delta"):
        rotate_keys(keys(num_tokens=4), torch.tensor([1.0, 2.0, 3.0, 4.0]), spec)
    with pytest.raises(ValueError, match="delta"):
        rotate_keys(keys(num_tokens=4), torch.tensor([1, 2]), spec)
