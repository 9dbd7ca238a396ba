"""A chat request's tool catalog reused as a chunk on the real SmolLM2 server: computed the
first time, found in the chunk store behind another system prompt (where vLLM's prefix cache has
nothing), served by the prefix cache on the session's next turn; never shared with another
project; with everything recomputed it gives full prefill's answer; streamed or with documents
it is reported the same way, and counted in the metrics."""

from __future__ import annotations

import json
import re
import uuid
from typing import Any

import httpx

from load_tests.tool_catalogs import tool_catalog
from tests.integration.conftest import Server, as_project

TOOLS = tool_catalog(6, catalog=7)
TRAVEL = "Please help me with my travel plans for next month, one step at a time, starting now:"
"""Shared by a session's turns past the catalog by more than one of vLLM's cache blocks."""


def _chat(server: Server, system: str, question: str, **extra: Any) -> dict[str, Any]:
    messages = [{"role": "system", "content": system}, {"role": "user", "content": question}]
    body = {"model": server.model, "messages": messages, "tools": TOOLS, "max_tokens": 24,
            "temperature": 0, **extra}  # fmt: skip
    with server.client() as client:
        reply = client.post("/v1/chat/completions", json=body)
    assert reply.status_code == 200, reply.text
    return reply.json()


def _source(reply: dict[str, Any]) -> str:
    return reply["blend"]["tool_block"]["source"]


def _new_system() -> str:
    return f"You are the assistant of session {uuid.uuid4().hex[:8]}. Be brief."


def _tool_block_count(server: Server, source: str) -> float:
    text = httpx.get(f"{server.url}/metrics").text
    match = re.search(rf'^ragblend_tool_blocks_total{{source="{source}"}} (\S+)$', text, re.M)
    return float(match.group(1)) if match else 0.0


def test_the_catalog_is_computed_once_then_reused_behind_any_system_prompt(server: Server) -> None:
    stored_before = _tool_block_count(server, "chunk_store")
    first = _chat(server, _new_system(), "What is the weather in Oslo?")
    assert _source(first) == "computed" and first["blend"]["context"] == "tools"
    catalog_tokens = first["blend"]["tool_block"]["tokens"]
    assert catalog_tokens > 300

    system = _new_system()
    second = _chat(server, system, f"{TRAVEL} Book a flight to Rome.")
    assert _source(second) == "chunk_store"
    assert second["blend"]["reused_tokens"] > 0 and second["blend"]["chunks_hit"] == 1
    assert (
        second["usage"]["prompt_tokens_details"]["cached_tokens"]
        >= second["blend"]["reused_tokens"]
    )

    next_turn = _chat(server, system, f"{TRAVEL} Find a hotel there.")
    assert _source(next_turn) == "prefix_cache"
    assert _tool_block_count(server, "chunk_store") == stored_before + 1


def test_another_project_never_reuses_the_catalog(server: Server) -> None:
    _chat(server, _new_system(), "Warm the catalog.")
    theirs = _chat(as_project(server, "epsilon"), _new_system(), "What is the weather in Oslo?")
    assert _source(theirs) == "computed"


def test_everything_recomputed_gives_full_prefills_answer(server: Server) -> None:
    _chat(server, _new_system(), "Warm the catalog.")
    system, question = _new_system(), "Create an invoice for order 17."
    # A few tokens: longer, bf16 rounding between the blend's kernels and vLLM's tips near-ties.
    exact = _chat(server, system, question, blend={"recompute_ratio": 1.0}, max_tokens=6)
    assert _source(exact) == "chunk_store"
    full = _chat(server, system, question, blend={"mode": "full"}, max_tokens=6)
    assert exact["choices"][0]["message"] == full["choices"][0]["message"]


def test_streamed_and_with_documents_the_catalog_is_reported(server: Server) -> None:
    _chat(server, _new_system(), "Warm the catalog.")
    body = {
        "model": server.model,
        "messages": [{"role": "system", "content": _new_system()},
                     {"role": "user", "content": "Where is the museum?"}],
        "tools": TOOLS,
        "documents": ["The harbour museum stands on Pier 4, beside the old customs house."],
        "max_tokens": 16,
        "temperature": 0,
        "stream": True,
        "stream_options": {"include_usage": True},
    }  # fmt: skip
    with server.client() as client, client.stream("POST", "/v1/chat/completions", json=body) as r:
        assert r.status_code == 200
        events = [line[6:] for line in r.iter_lines() if line.startswith("data: ")]
    assert events[-1] == "[DONE]"
    last = json.loads(events[-2])
    assert last["blend"]["tool_block"]["source"] == "chunk_store"
    assert last["blend"]["chunks_hit"] + last["blend"]["chunks_missed"] == 2


def test_a_request_without_tools_has_no_catalog(server: Server) -> None:
    messages = [{"role": "user", "content": "Say hello."}]
    body = {"model": server.model, "messages": messages, "max_tokens": 4}
    with server.client() as client:
        reply = client.post("/v1/chat/completions", json=body).json()
    assert "tool_block" not in reply.get("blend", {})


def test_responses_reuse_the_catalog_behind_other_instructions(server: Server) -> None:
    tools = [{"type": "function", **tool["function"]} for tool in TOOLS]

    def respond(instructions: str) -> None:
        body = {"model": server.model, "instructions": instructions, "tools": tools,
                "input": "Find my latest invoice.", "max_output_tokens": 8}  # fmt: skip
        with server.client() as client:
            reply = client.post("/v1/responses", json=body)
        assert reply.status_code == 200, reply.text

    respond(_new_system())
    stored_before = _tool_block_count(server, "chunk_store")
    respond(_new_system())
    assert _tool_block_count(server, "chunk_store") == stored_before + 1
