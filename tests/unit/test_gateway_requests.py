"""Request validation and context budgeting, without an engine."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from gateway.http.errors import APIError
from gateway.openai.protocol import ChatCompletionRequest, CompletionRequest
from gateway.rag.prompts import completion_budget
from gateway.settings import Settings


def test_budget_defaults_to_what_fits() -> None:
    assert completion_budget(100, None, max_model_len=1000, default=256) == 256
    assert completion_budget(900, None, max_model_len=1000, default=256) == 100


def test_budget_over_the_context_names_both_numbers() -> None:
    with pytest.raises(APIError) as caught:
        completion_budget(900, 200, max_model_len=1000, default=256)
    assert caught.value.status == 400
    assert "1000" in caught.value.message and "1100" in caught.value.message


def test_prompt_filling_the_context_is_rejected() -> None:
    with pytest.raises(APIError, match="1000"):
        completion_budget(1000, None, max_model_len=1000, default=256)


@pytest.mark.parametrize("prompt", ["", [], [[]], ["ok", ""]])
def test_empty_prompts_are_invalid(prompt: object) -> None:
    with pytest.raises(ValidationError):
        CompletionRequest(model="m", prompt=prompt)


def test_stop_accepts_a_string_or_up_to_four() -> None:
    assert CompletionRequest(model="m", prompt="p", stop="x").stop == ["x"]
    with pytest.raises(ValidationError):
        CompletionRequest(model="m", prompt="p", stop=["a", "b", "c", "d", "e"])


def test_stream_options_need_stream() -> None:
    with pytest.raises(ValidationError):
        CompletionRequest(model="m", prompt="p", stream_options={"include_usage": True})


def test_chat_max_completion_tokens_is_an_alias_and_top_logprobs_needs_logprobs() -> None:
    messages = [{"role": "user", "content": [{"type": "text", "text": "hi"}]}]
    request = ChatCompletionRequest(model="m", messages=messages, max_completion_tokens=7)
    assert request.max_tokens == 7
    assert request.messages[0].text == "hi"
    with pytest.raises(ValidationError):
        ChatCompletionRequest(model="m", messages=messages, top_logprobs=2)


def test_settings_read_prefixed_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RAGBLEND_API_KEYS", " a , b ,")
    monkeypatch.setenv("RAGBLEND_DATA_DIR", "/srv/rag")
    settings = Settings()
    assert settings.api_keys == ["a", "b"]
    assert str(settings.models_dir) == "/srv/rag/models"
