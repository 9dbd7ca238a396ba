"""The client libraries people put in front of an OpenAI-compatible server, unmodified, against
the real SmolLM2 server: LangChain's ``ChatOpenAI`` (a bound tool called and answered,
structured output by JSON schema and by function calling), instructor (TOOLS and JSON modes) and
LlamaIndex's ``OpenAILike`` (completion and chat). Each test checks what the library's user gets
back: a parsed object of the right type, a called tool with arguments matching its schema, text.
Only ``base_url`` and ``api_key`` point them here; nothing leaves this machine."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Literal

import instructor
import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI
from llama_index.core.llms import ChatMessage
from llama_index.llms.openai_like import OpenAILike
from openai import OpenAI
from pydantic import BaseModel, Field

from tests.integration.conftest import Server
from tests.integration.local_only import local_network_only

pytestmark = pytest.mark.integration

CALLED: list[str] = []


@tool
def get_weather(city: str) -> str:
    """The current weather in a city."""
    CALLED.append(city)
    return f"Sunny and 24 degrees in {city}."


class City(BaseModel):
    """A city and whether it is its country's capital."""

    city: str = Field(max_length=20)
    capital: bool


@pytest.fixture(scope="module", autouse=True)
def local_only() -> Iterator[None]:
    with local_network_only() as refused:
        yield
    assert refused == [], f"a client library tried to reach {refused}"


@pytest.fixture(scope="module")
def chat_model(server: Server) -> ChatOpenAI:
    return ChatOpenAI(
        model=server.model,
        base_url=f"{server.url}/v1",
        api_key=server.api_key,  # type: ignore[arg-type]
        temperature=0,
        max_tokens=40,  # type: ignore[call-arg]
        max_retries=0,
    )


def test_langchain_bound_tool_is_called_then_its_result_answered(chat_model: ChatOpenAI) -> None:
    question = HumanMessage("What is the weather in Paris?")
    asked = chat_model.bind_tools([get_weather], tool_choice="required").invoke([question])
    assert isinstance(asked, AIMessage)
    [call] = asked.tool_calls
    assert call["name"] == "get_weather" and call["id"]
    assert set(call["args"]) == {"city"} and isinstance(call["args"]["city"], str)
    result = get_weather.invoke(call)
    assert isinstance(result, ToolMessage) and CALLED[-1] == call["args"]["city"]
    answer = chat_model.bind_tools([get_weather], tool_choice="none").invoke(
        [question, asked, result]
    )
    assert isinstance(answer.content, str) and answer.content.strip()
    assert answer.tool_calls == []


@pytest.mark.parametrize("method", ["json_schema", "function_calling"])
def test_langchain_structured_output_is_a_parsed_object(
    chat_model: ChatOpenAI, method: Literal["json_schema", "function_calling"]
) -> None:
    structured = chat_model.with_structured_output(City, method=method)
    parsed = structured.invoke("Paris is the capital of France. Describe Paris.")
    assert isinstance(parsed, City)
    assert parsed.city and len(parsed.city) <= 20 and isinstance(parsed.capital, bool)


@pytest.fixture(scope="module")
def openai_client(server: Server) -> OpenAI:
    return OpenAI(base_url=f"{server.url}/v1", api_key=server.api_key, max_retries=0)


def test_instructor_tools_mode_returns_the_response_model(
    openai_client: OpenAI, server: Server
) -> None:
    client = instructor.from_openai(openai_client, mode=instructor.Mode.TOOLS)
    city = client.chat.completions.create(
        model=server.model,
        response_model=City,
        messages=[{"role": "user", "content": "Paris is the capital of France. Describe Paris."}],
        max_tokens=40,
        temperature=0,
        max_retries=1,
    )
    assert isinstance(city, City)
    assert city.city and len(city.city) <= 20 and isinstance(city.capital, bool)


def test_instructor_json_mode_returns_the_response_model(
    openai_client: OpenAI, server: Server
) -> None:
    # JSON mode sends ``response_format: json_object`` and the schema as text; SmolLM2-135M copies
    # that schema back unless one earlier turn shows an instance, as a user of a small model does.
    client = instructor.from_openai(openai_client, mode=instructor.Mode.JSON)
    city = client.chat.completions.create(
        model=server.model,
        response_model=City,
        messages=[
            {"role": "user", "content": "Rome is the capital of Italy. Describe Rome."},
            {"role": "assistant", "content": '{"city": "Rome", "capital": true}'},
            {"role": "user", "content": "Paris is the capital of France. Describe Paris."},
        ],
        max_tokens=40,
        temperature=0,
        max_retries=1,
    )
    assert isinstance(city, City)
    assert city.city == "Paris" and isinstance(city.capital, bool)


def _llama(server: Server, chat: bool) -> OpenAILike:
    return OpenAILike(
        model=server.model,
        api_base=f"{server.url}/v1",
        api_key=server.api_key,
        is_chat_model=chat,
        context_window=2048,
        max_tokens=16,
        temperature=0,
        max_retries=0,
    )


def test_llamaindex_openai_like_completes(server: Server) -> None:
    completion = _llama(server, chat=False).complete("The capital of France is")
    assert isinstance(completion.text, str) and completion.text.strip()


def test_llamaindex_openai_like_chats(server: Server) -> None:
    reply = _llama(server, chat=True).chat(
        [ChatMessage(role="user", content="What is the capital of France?")]
    )
    assert reply.message.role == "assistant"
    assert isinstance(reply.message.content, str) and reply.message.content.strip()
