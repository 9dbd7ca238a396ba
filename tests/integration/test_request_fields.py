"""Request fields beyond the basics, on the real model: structured outputs through the OpenAI
SDK, vLLM's sampling fields with a visible effect, a refused field, titled documents."""

from __future__ import annotations

import json
import uuid
from typing import Literal

import jsonschema
import openai
import pytest
from openai import OpenAI
from pydantic import BaseModel, Field

from tests.integration.conftest import Server

pytestmark = pytest.mark.integration

CITY_SCHEMA = {
    "type": "object",
    "properties": {
        "city": {"type": "string", "maxLength": 20},
        "continent": {"type": "string", "enum": ["Europe", "Asia", "Africa", "America"]},
        "population_millions": {"type": "integer", "minimum": 0, "maximum": 100},
        "capital": {"type": "boolean"},
    },
    "required": ["city", "continent", "population_millions", "capital"],
    "additionalProperties": False,
}
ASK = [{"role": "user", "content": "Describe Paris as JSON."}]


class City(BaseModel):
    city: str = Field(max_length=20)
    continent: Literal["Europe", "Asia", "Africa", "America"]
    capital: bool


@pytest.fixture(scope="module")
def client(server: Server) -> OpenAI:
    return OpenAI(base_url=f"{server.url}/v1", api_key=server.api_key, max_retries=0)


def test_every_sampled_answer_parses_against_the_schema(client: OpenAI, server: Server) -> None:
    reply = client.chat.completions.create(
        model=server.model,
        messages=ASK,
        n=3,
        temperature=1.0,
        seed=7,
        max_tokens=120,
        response_format={
            "type": "json_schema",
            "json_schema": {"name": "city", "schema": CITY_SCHEMA, "strict": True},
        },
    )
    assert len(reply.choices) == 3
    for choice in reply.choices:
        jsonschema.validate(json.loads(choice.message.content), CITY_SCHEMA)


def test_the_sdk_parses_a_pydantic_response_format(client: OpenAI, server: Server) -> None:
    reply = client.chat.completions.parse(
        model=server.model, messages=ASK, response_format=City, max_tokens=120, temperature=0
    )
    parsed = reply.choices[0].message.parsed
    assert isinstance(parsed, City) and parsed.continent in ("Europe", "Asia", "Africa", "America")


def test_json_object_and_vllm_choice_on_completions(client: OpenAI, server: Server) -> None:
    """An open-ended object may still be cut by ``max_tokens``; it starts as one regardless."""
    as_json = client.completions.create(
        model=server.model,
        prompt="A JSON object describing a cat:",
        max_tokens=60,
        temperature=0,
        extra_body={"response_format": {"type": "json_object"}},
    )
    text = as_json.choices[0].text
    assert text.startswith("{")
    if as_json.choices[0].finish_reason == "stop":
        assert isinstance(json.loads(text), dict)
    choice = client.completions.create(
        model=server.model,
        prompt="Is the sky green?",
        max_tokens=5,
        extra_body={"structured_outputs": {"choice": ["maybe", "never"]}},
    )
    assert choice.choices[0].text in ("maybe", "never")


def test_responses_text_format_gives_schema_json(client: OpenAI, server: Server) -> None:
    response = client.responses.create(
        model=server.model,
        input="Describe Paris as JSON.",
        max_output_tokens=120,
        store=False,
        text={"format": {"type": "json_schema", "name": "city", "schema": CITY_SCHEMA}},
    )
    jsonschema.validate(json.loads(response.output_text), CITY_SCHEMA)
    assert response.text.format.type == "json_schema"


def test_an_invalid_schema_and_a_refused_field_are_400s(client: OpenAI, server: Server) -> None:
    bad_schema = {"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": 5}}}
    with pytest.raises(openai.BadRequestError) as refused:
        client.chat.completions.create(model=server.model, messages=ASK, response_format=bad_schema)
    assert refused.value.body["param"] == "response_format.json_schema.schema"
    with pytest.raises(openai.BadRequestError) as refused:
        client.chat.completions.create(model=server.model, messages=ASK, reasoning_effort="high")
    assert refused.value.body["param"] == "reasoning_effort"


def test_logit_bias_min_tokens_and_ignore_eos_change_the_output(
    client: OpenAI, server: Server, tokenizer
) -> None:
    """With the end-of-text token pushed to +100 the model stops at once; ``min_tokens`` holds
    it back, ``ignore_eos`` runs on to ``max_tokens``; a token at +100 is all it says."""

    def complete(**extra: object) -> openai.types.Completion:
        return client.completions.create(
            model=server.model, prompt="Once upon a time", max_tokens=8, temperature=0, **extra
        )

    eos = {str(tokenizer.eos_token_id): 100}
    assert complete(logit_bias=eos).usage.completion_tokens == 1
    held = complete(logit_bias=eos, extra_body={"min_tokens": 5})
    assert held.usage.completion_tokens == 6 and held.choices[0].finish_reason == "stop"
    running = complete(logit_bias=eos, extra_body={"ignore_eos": True})
    assert running.choices[0].finish_reason == "length"
    cat = tokenizer.encode(" cat", add_special_tokens=False)[0]
    assert complete(logit_bias={str(cat): 100}).choices[0].text == " cat" * 8


def test_top_k_one_samples_the_greedy_answer(client: OpenAI, server: Server) -> None:
    prompt, common = "The weather today", {"model": server.model, "max_tokens": 12}
    greedy = client.completions.create(prompt=prompt, temperature=0, **common).choices[0].text
    sampled = client.completions.create(
        prompt=prompt, temperature=1.5, n=3, extra_body={"top_k": 1}, **common
    )
    assert [choice.text for choice in sampled.choices] == [greedy] * 3


def test_titled_documents_are_chunks_that_hit_the_second_time_under_a_schema(
    client: OpenAI, server: Server
) -> None:
    """A structured-output request with documents reuses every cached chunk, and its answer
    still parses against the schema."""
    tag = uuid.uuid4().hex[:8]
    documents = [
        {"title": f"Summit {tag}", "text": "The 2031 summit takes place in Oslo."},
        f"Oslo is the capital of Norway ({tag}).",
    ]
    body = {"documents": documents, "blend": {"mode": "blend"}}

    def ask(**fields: object) -> tuple[dict, str | None]:
        reply = client.chat.completions.create(
            model=server.model, messages=ASK, temperature=0, extra_body=body, **fields
        )
        return reply.model_extra["blend"], reply.choices[0].message.content

    first, _ = ask(max_tokens=4)
    assert first["chunks_missed"] == 2
    schema = {"name": "city", "schema": CITY_SCHEMA, "strict": True}
    second, answer = ask(
        max_tokens=120, response_format={"type": "json_schema", "json_schema": schema}
    )
    assert (second["chunks_hit"], second["chunks_missed"]) == (2, 0)
    jsonschema.validate(json.loads(answer or ""), CITY_SCHEMA)
