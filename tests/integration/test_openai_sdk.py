"""The OpenAI Python SDK pointed at a real ragblend server."""

from __future__ import annotations

import openai
import pytest
from openai import OpenAI

from tests.integration.conftest import MAX_MODEL_LEN, Server

pytestmark = pytest.mark.integration

QUESTION = "The capital of France is"


@pytest.fixture(scope="module")
def client(server: Server) -> OpenAI:
    return OpenAI(base_url=f"{server.url}/v1", api_key=server.api_key, max_retries=0)


def test_models_lists_the_served_model(client: OpenAI, server: Server) -> None:
    assert [model.id for model in client.models.list()] == [server.model]


def test_completion_reports_text_usage_and_length_finish(client: OpenAI, server: Server) -> None:
    result = client.completions.create(
        model=server.model, prompt=QUESTION, max_tokens=8, temperature=0
    )
    assert result.choices[0].text.strip()
    assert result.choices[0].finish_reason == "length"
    assert result.usage.completion_tokens == 8
    assert result.usage.prompt_tokens > 3
    assert result.usage.total_tokens == result.usage.prompt_tokens + 8


def test_string_and_token_id_prompts_give_the_same_greedy_text(
    client: OpenAI, server: Server, tokenizer
) -> None:
    ids = tokenizer.encode(QUESTION)
    by_text = client.completions.create(
        model=server.model, prompt=QUESTION, max_tokens=10, temperature=0
    )
    by_ids = client.completions.create(model=server.model, prompt=ids, max_tokens=10, temperature=0)
    assert by_text.choices[0].text == by_ids.choices[0].text
    assert by_text.usage.prompt_tokens == len(ids)


def test_streamed_completion_matches_the_non_streamed_one(client: OpenAI, server: Server) -> None:
    whole = client.completions.create(
        model=server.model, prompt=QUESTION, max_tokens=12, temperature=0
    )
    chunks = list(
        client.completions.create(
            model=server.model,
            prompt=QUESTION,
            max_tokens=12,
            temperature=0,
            stream=True,
            stream_options={"include_usage": True},
        )
    )
    text = "".join(chunk.choices[0].text for chunk in chunks if chunk.choices)
    assert text == whole.choices[0].text
    assert chunks[-1].choices == []
    assert chunks[-1].usage.completion_tokens == 12


def test_several_prompts_and_n_choices_are_numbered_like_openai(
    client: OpenAI, server: Server
) -> None:
    result = client.completions.create(
        model=server.model, prompt=["Hello", "Goodbye"], max_tokens=4, n=2, temperature=0.8, seed=3
    )
    assert sorted(choice.index for choice in result.choices) == [0, 1, 2, 3]
    assert result.usage.completion_tokens == 16


def test_seed_makes_sampling_reproducible(client: OpenAI, server: Server) -> None:
    def sample() -> str:
        result = client.completions.create(
            model=server.model, prompt="Once upon a time", max_tokens=16, temperature=1.0, seed=42
        )
        return result.choices[0].text

    assert sample() == sample()


def test_stop_sequence_ends_the_text(client: OpenAI, server: Server) -> None:
    result = client.completions.create(
        model=server.model, prompt="1, 2, 3, 4,", max_tokens=30, temperature=0, stop=["7"]
    )
    assert "7" not in result.choices[0].text
    assert result.choices[0].finish_reason == "stop"


def test_completion_logprobs_cover_every_token(client: OpenAI, server: Server) -> None:
    result = client.completions.create(
        model=server.model, prompt=QUESTION, max_tokens=5, temperature=0, logprobs=3
    )
    logprobs = result.choices[0].logprobs
    assert len(logprobs.tokens) == 5
    assert "".join(logprobs.tokens) == result.choices[0].text
    assert all(value <= 0 for value in logprobs.token_logprobs)
    assert all(1 <= len(top) <= 3 for top in logprobs.top_logprobs)
    # greedy decoding picks the most likely token
    for token, top in zip(logprobs.tokens, logprobs.top_logprobs, strict=True):
        assert max(top, key=top.get) == token


def test_chat_completion_and_stream_agree(client: OpenAI, server: Server) -> None:
    messages = [{"role": "user", "content": "Name a colour."}]
    whole = client.chat.completions.create(
        model=server.model, messages=messages, max_tokens=10, temperature=0
    )
    assert whole.choices[0].message.role == "assistant"
    assert whole.choices[0].message.content
    chunks = list(
        client.chat.completions.create(
            model=server.model, messages=messages, max_tokens=10, temperature=0, stream=True
        )
    )
    assert chunks[0].choices[0].delta.role == "assistant"
    text = "".join(chunk.choices[0].delta.content or "" for chunk in chunks)
    assert text == whole.choices[0].message.content
    assert chunks[-1].choices[0].finish_reason == whole.choices[0].finish_reason


def test_chat_logprobs(client: OpenAI, server: Server) -> None:
    result = client.chat.completions.create(
        model=server.model,
        messages=[{"role": "user", "content": "Hi"}],
        max_tokens=4,
        temperature=0,
        logprobs=True,
        top_logprobs=2,
    )
    content = result.choices[0].logprobs.content
    assert len(content) == result.usage.completion_tokens
    assert all(len(entry.top_logprobs) == 2 for entry in content)


def test_unknown_model_is_404(client: OpenAI) -> None:
    with pytest.raises(openai.NotFoundError) as caught:
        client.completions.create(model="no-such-model", prompt="x", max_tokens=1)
    assert caught.value.body["code"] == "model_not_found"


def test_invalid_parameter_is_400(client: OpenAI, server: Server) -> None:
    with pytest.raises(openai.BadRequestError) as caught:
        client.completions.create(model=server.model, prompt="x", max_tokens=1, top_p=3)
    assert caught.value.body["param"] == "top_p"


def test_prompt_over_the_context_length_is_400_naming_both_numbers(
    client: OpenAI, server: Server
) -> None:
    too_long = [42] * (MAX_MODEL_LEN + 10)
    with pytest.raises(openai.BadRequestError) as caught:
        client.completions.create(model=server.model, prompt=too_long, max_tokens=1)
    message = caught.value.body["message"]
    assert str(MAX_MODEL_LEN) in message
    assert str(MAX_MODEL_LEN + 10) in message


def test_wrong_api_key_is_401(server: Server) -> None:
    stranger = OpenAI(base_url=f"{server.url}/v1", api_key="wrong", max_retries=0)
    with pytest.raises(openai.AuthenticationError):
        stranger.models.list()
