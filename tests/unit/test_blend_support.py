"""Blending switches itself off for models it cannot re-position exactly."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from engine.blend.rope import RopeSpec
from engine.connector.model import UnsupportedModel, _check_rotation, checked_rope_spec
from engine.model_support import blending_unsupported_reason, tensor_parallel_problem


def _model_dir(tmp_path: Path, **config: object) -> Path:
    (tmp_path / "config.json").write_text(json.dumps(config))
    return tmp_path


def test_llama_and_qwen2_with_plain_rope_are_supported(tmp_path: Path) -> None:
    for architecture in ("LlamaForCausalLM", "Qwen2ForCausalLM"):
        model_dir = _model_dir(
            tmp_path, architectures=[architecture], rope_parameters={"rope_type": "default"}
        )
        assert blending_unsupported_reason(model_dir) is None


def test_other_architectures_and_scaled_rope_are_refused(tmp_path: Path) -> None:
    gpt2 = _model_dir(tmp_path, architectures=["GPT2LMHeadModel"])
    assert "GPT2LMHeadModel" in blending_unsupported_reason(gpt2)
    yarn = _model_dir(
        tmp_path, architectures=["Qwen2ForCausalLM"], rope_scaling={"type": "yarn", "factor": 4}
    )
    assert "yarn" in blending_unsupported_reason(yarn)


def _vllm_rotary(base: float = 10000.0):
    get_rope = pytest.importorskip("vllm.model_executor.layers.rotary_embedding").get_rope
    from vllm.config import VllmConfig, set_current_vllm_config

    with set_current_vllm_config(VllmConfig()):
        return get_rope(
            64, max_position=4096, rope_parameters={"rope_theta": base}, is_neox_style=True
        )


def test_the_models_own_rotary_embedding_passes_the_start_up_check() -> None:
    spec = checked_rope_spec(_vllm_rotary())
    assert spec is not None and spec.base == 10000.0 and spec.is_neox_style


def test_the_check_leaves_the_models_cos_sin_table_as_it_found_it() -> None:
    """A compiled forward reads the table as it was when compiled: converted in place to the
    check's float32, it made every answer of a compiled CPU model garbage."""
    import torch

    rotary = _vllm_rotary().to(torch.bfloat16)
    rotary.cos_sin_cache = rotary.cos_sin_cache.to(torch.bfloat16)
    table = rotary.cos_sin_cache
    before = table.clone()
    assert checked_rope_spec(rotary) is not None
    assert rotary.cos_sin_cache is table and table.dtype == torch.bfloat16
    assert torch.equal(table, before)


def test_a_rotation_that_disagrees_with_the_model_is_refused() -> None:
    wrong = RopeSpec(head_dim=64, rotary_dim=64, base=500.0, is_neox_style=True)
    with pytest.raises(UnsupportedModel, match="does not match"):
        _check_rotation(_vllm_rotary(), wrong)


def test_a_split_that_does_not_divide_the_heads_is_refused_by_name(tmp_path: Path) -> None:
    smollm2 = _model_dir(tmp_path, num_attention_heads=9, num_key_value_heads=3)
    assert tensor_parallel_problem(smollm2, 1) is None
    assert tensor_parallel_problem(smollm2, 3) is None
    problem = tensor_parallel_problem(smollm2, 2)
    assert problem is not None and "2" in problem and "9 attention heads" in problem
    assert "3 KV heads" in problem
    qwen = _model_dir(tmp_path, num_attention_heads=14, num_key_value_heads=2)
    assert tensor_parallel_problem(qwen, 2) is None
    assert "14 attention heads" in (tensor_parallel_problem(qwen, 4) or "")
