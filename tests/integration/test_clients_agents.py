"""The OpenAI Agents SDK, unmodified, on the real SmolLM2 server's ``/v1/responses``: an agent
calls a ``function_tool`` (its JSON arguments parsed into the Python function), a ``FileSearchTool``
agent answers from a vector store built through ``/v1/files`` and ``/v1/vector_stores``, and both
carry a conversation into a second turn (the SDK sends its earlier items back as input). The tiny
model is made deterministic the SDK's own way: greedy sampling, ``tool_choice="required"`` and
``tool_use_behavior="stop_on_first_tool"``. Tracing is off and nothing leaves this machine."""

from __future__ import annotations

import io
from collections.abc import AsyncIterator, Iterator

import pytest
import pytest_asyncio
from agents import (
    Agent,
    FileSearchTool,
    ModelSettings,
    OpenAIResponsesModel,
    Runner,
    ToolCallItem,
    function_tool,
    set_tracing_disabled,
)
from openai import AsyncOpenAI

from tests.integration.conftest import Server
from tests.integration.local_only import local_network_only

# The client and its connections live on the session loop, as do the fixtures that make them.
pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]

LIGHTHOUSE = (
    "The Zephyr lighthouse on Corran Island was built in 1871 by the engineer Mara Voss. "
    "Its lamp can be seen 22 nautical miles out to sea."
)
CALLED: list[str] = []


@function_tool
def get_weather(city: str) -> str:
    """The current weather in a city.

    Args:
        city: The city's name.
    """
    CALLED.append(city)
    return f"Sunny and 24 degrees in {city}."


@pytest.fixture(scope="module", autouse=True)
def local_only() -> Iterator[None]:
    set_tracing_disabled(True)
    with local_network_only() as refused:
        yield
    assert refused == [], f"the Agents SDK tried to reach {refused}"


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def client(server: Server) -> AsyncIterator[AsyncOpenAI]:
    async with AsyncOpenAI(
        base_url=f"{server.url}/v1", api_key=server.api_key, max_retries=0
    ) as opened:
        yield opened


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def vector_store_id(client: AsyncOpenAI) -> AsyncIterator[str]:
    store = await client.vector_stores.create(name="agents coast guide")
    attached = await client.vector_stores.files.upload_and_poll(
        vector_store_id=store.id, file=("zephyr.md", io.BytesIO(LIGHTHOUSE.encode()))
    )
    assert attached.status == "completed"
    yield store.id
    await client.files.delete(attached.id)
    await client.vector_stores.delete(store.id)


def _model(client: AsyncOpenAI, server: Server) -> OpenAIResponsesModel:
    return OpenAIResponsesModel(model=server.model, openai_client=client)


async def test_an_agent_calls_its_function_tool_over_two_turns(
    client: AsyncOpenAI, server: Server
) -> None:
    agent = Agent(
        name="weather",
        instructions="Answer weather questions with the get_weather tool.",
        model=_model(client, server),
        tools=[get_weather],
        tool_use_behavior="stop_on_first_tool",
        model_settings=ModelSettings(tool_choice="required", temperature=0, max_tokens=40),
    )
    first = await Runner.run(agent, "What is the weather in Paris?", max_turns=2)
    [call] = [item for item in first.new_items if isinstance(item, ToolCallItem)]
    assert call.raw_item.type == "function_call" and call.raw_item.name == "get_weather"
    assert isinstance(CALLED[-1], str) and CALLED[-1]
    assert first.final_output == f"Sunny and 24 degrees in {CALLED[-1]}."
    follow_up = [*first.to_input_list(), {"role": "user", "content": "And in Berlin?"}]
    second = await Runner.run(agent, follow_up, max_turns=2)
    assert len(CALLED) == 2 and isinstance(CALLED[-1], str) and CALLED[-1]
    assert second.final_output == f"Sunny and 24 degrees in {CALLED[-1]}."


async def test_a_file_search_agent_answers_from_the_vector_store_over_two_turns(
    client: AsyncOpenAI, server: Server, vector_store_id: str
) -> None:
    agent = Agent(
        name="guide",
        instructions="Answer from the documents in one short sentence.",
        model=_model(client, server),
        tools=[FileSearchTool(vector_store_ids=[vector_store_id], include_search_results=True)],
        # Room to finish: the SDK raises on a response cut at max_output_tokens, and what the
        # model says depends on the context the shared server's library gives the chunk.
        model_settings=ModelSettings(temperature=0, max_tokens=256),
    )
    first = await Runner.run(agent, "Who built the Zephyr lighthouse?", max_turns=2)
    [search] = [item for item in first.new_items if isinstance(item, ToolCallItem)]
    assert search.raw_item.type == "file_search_call"
    assert search.raw_item.results and "Mara Voss" in (search.raw_item.results[0].text or "")
    assert isinstance(first.final_output, str) and first.final_output.strip()
    follow_up = [*first.to_input_list(), {"role": "user", "content": "When was it built?"}]
    second = await Runner.run(agent, follow_up, max_turns=2)
    assert isinstance(second.final_output, str) and second.final_output.strip()
    third = await Runner.run(
        agent, "How far can its lamp be seen?", previous_response_id=second.last_response_id
    )
    assert isinstance(third.final_output, str) and third.final_output.strip()
