"""The engine's step budget (``RAGBLEND_MAX_NUM_BATCHED_TOKENS``): vLLM's OpenAI server default
unless set, and a budget vLLM would refuse is refused before any engine starts."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from gateway.cli.main import main
from gateway.settings import Settings


@pytest.fixture(autouse=True)
def no_settings_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("RAGBLEND_MAX_NUM_BATCHED_TOKENS", "RAGBLEND_MAX_NUM_SEQS"):
        monkeypatch.delenv(name, raising=False)


def test_unset_leaves_the_budget_to_vllm() -> None:
    assert Settings().max_num_batched_tokens is None


def test_a_budget_of_at_least_one_token_a_sequence_is_taken() -> None:
    assert Settings(max_num_batched_tokens=16, max_num_seqs=16).max_num_batched_tokens == 16


def test_a_budget_below_one_token_a_sequence_is_refused() -> None:
    with pytest.raises(ValidationError, match=r"MAX_NUM_BATCHED_TOKENS \(8\) must be at least"):
        Settings(max_num_batched_tokens=8, max_num_seqs=16)


def test_serve_names_both_variables(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("RAGBLEND_MAX_NUM_BATCHED_TOKENS", "12")
    assert main(["serve"]) == 2
    error = capsys.readouterr().err
    assert error.startswith("error: invalid settings: RAGBLEND_MAX_NUM_BATCHED_TOKENS (12)")
    assert "RAGBLEND_MAX_NUM_SEQS (16)" in error
