"""A ``POST /v1/responses`` body, checked against the ``openai`` package's own parameter types,
and the part of it ragblend serves: text messages, sampling, storage, the ``file_search`` tool
(``ranking_options`` too) and ``function`` tools (with their calls and outputs as input items).
Anything else that would change the answer is refused with a 400 naming it, never ignored."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from openai.types.responses import FileSearchTool, response_create_params
from pydantic import ValidationError

from gateway.http.errors import APIError
from gateway.openai.filters import Filter, parse_filter
from gateway.openai.ranking import RankingOptions
from gateway.openai.response_tools import call_message, function_tool, merged_calls, output_message
from gateway.openai.structured import ResponseFormat, text_format
from gateway.openai.tool_types import ToolSpec
from gateway.openai.validation import check_metadata, check_text, invalid, parse_params

MAX_SEARCH_RESULTS = 50
RESULTS = "file_search_call.results"
TEXT_PARTS = ("input_text", "output_text")
UNSUPPORTED = (
    "background",
    "background_options",
    "conversation",
    "prompt",
    "top_logprobs",
    "max_tool_calls",
    "context_management",
    "moderation",
)
KNOWN = frozenset(response_create_params.ResponseCreateParamsStreaming.__annotations__)
"""Every field of OpenAI's Responses request (``stream`` included); any other is a 400."""


@dataclass(frozen=True)
class FileSearch:
    store_ids: list[str]
    max_results: int
    condition: Filter | None
    ranking: RankingOptions | None  # ``ranking_options``
    tool: dict[str, Any]
    """The tool as the response echoes it."""


@dataclass(frozen=True)
class ResponsesTurn:
    model: str
    messages: list[dict[str, Any]]
    """This request's input as chat messages (``role``, ``content``, calls and call ids)."""
    instructions: str | None = None
    previous_response_id: str | None = None
    file_search: FileSearch | None = None
    include_results: bool = False
    max_output_tokens: int | None = None
    temperature: float | None = None
    top_p: float | None = None
    stream: bool = False
    store: bool = True
    metadata: dict[str, str] = field(default_factory=dict)
    tool_choice: Any = "auto"
    parallel_tool_calls: bool = True
    text_format: dict[str, Any] = field(default_factory=lambda: {"type": "text"})
    """``text.format`` as the response echoes it."""
    response_format: ResponseFormat | None = None
    """The same, as chat's ``response_format``: what constrains the answer."""
    functions: list[ToolSpec] = field(default_factory=list)
    function_params: list[str] = field(default_factory=list)
    """Where each function tool sits in the request (``tools.N``), for errors."""
    function_tools: list[dict[str, Any]] = field(default_factory=list)
    """The function tools as the response echoes them."""

    @property
    def question(self) -> str:
        """What ``file_search`` searches for: the last user message of the input."""
        users = [message["content"] for message in self.messages if message["role"] == "user"]
        return users[-1] if users else ""


def parse_turn(body: Any, default_results: int) -> ResponsesTurn:
    unknown = sorted(set(body) - KNOWN) if isinstance(body, dict) else []
    if unknown:
        message = f"Unrecognized request argument supplied: {unknown[0]}"
        raise APIError(400, message, param=unknown[0])
    params = parse_params(response_create_params.ResponseCreateParamsBase, body)
    for name in UNSUPPORTED:
        if params.get(name) not in (None, False, 0, []):
            raise APIError(400, f"'{name}' is not supported by ragblend.", param=name)
    _check_answer_options(params)
    text_format, response_format = _text_format(params.get("text"))
    stream = body.get("stream") or False
    if not isinstance(stream, bool):
        raise APIError(400, "'stream' must be a boolean.", param="stream")
    for name in ("model", "input"):
        if not params.get(name):
            raise APIError(400, f"Missing required parameter: '{name}'.", param=name)
    include = list(params.get("include") or [])
    if any(item != RESULTS for item in include):
        raise APIError(400, f"'include' supports only '{RESULTS}'.", param="include")
    tool_choice = params.get("tool_choice", "auto")
    tools = body.get("tools") or []
    file_search = _file_search(tools, tool_choice, default_results)
    functions = {
        index: tool
        for index, tool in enumerate(tools)
        if isinstance(tool, dict) and tool.get("type") == "function"
    }
    _check_range(params.get("temperature"), "temperature", 0.0, 2.0)
    _check_range(params.get("top_p"), "top_p", 0.0, 1.0)
    max_output_tokens = params.get("max_output_tokens")
    if max_output_tokens is not None and max_output_tokens < 1:
        raise APIError(400, "'max_output_tokens' must be at least 1.", param="max_output_tokens")
    return ResponsesTurn(
        model=params["model"],
        messages=_messages(body["input"]),
        instructions=_optional_text(params.get("instructions"), "instructions"),
        previous_response_id=_optional_text(
            params.get("previous_response_id"), "previous_response_id"
        ),
        file_search=file_search,
        include_results=RESULTS in include,
        max_output_tokens=max_output_tokens,
        temperature=params.get("temperature"),
        top_p=params.get("top_p"),
        stream=stream,
        store=params.get("store") is not False,
        metadata=check_metadata(params.get("metadata")),
        tool_choice=tool_choice,
        parallel_tool_calls=params.get("parallel_tool_calls") is not False,
        text_format=text_format,
        response_format=response_format,
        functions=[function_tool(tool, f"tools.{index}") for index, tool in functions.items()],
        function_params=[f"tools.{index}" for index in functions],
        function_tools=list(functions.values()),
    )


def _messages(raw: str | list[dict[str, Any]]) -> list[dict[str, Any]]:
    if isinstance(raw, str):
        return [{"role": "user", "content": check_text(raw, "input")}]
    messages = []
    for index, item in enumerate(raw):
        kind = item.get("type", "message")
        if kind == "file_search_call":
            continue  # an earlier turn's search, sent back: its answer follows as a message
        if kind == "function_call":
            messages.append(call_message(item, f"input.{index}"))
            continue
        if kind == "function_call_output":
            messages.append(output_message(item, f"input.{index}"))
            continue
        if kind != "message" or "role" not in item:
            raise APIError(
                400, f"Input items of type '{kind}' are not supported.", param=f"input.{index}"
            )
        text = _text(item["content"], f"input.{index}.content")
        messages.append({"role": item["role"], "content": text})
    if not messages:
        raise APIError(400, "'input' has no message.", param="input")
    return merged_calls(messages)


def _text(content: str | list[dict[str, Any]], param: str) -> str:
    if isinstance(content, str):
        return check_text(content, param)
    pieces = []
    for index, part in enumerate(content):
        if part.get("type") not in TEXT_PARTS:
            raise APIError(
                400,
                f"Content of type '{part.get('type')}' is not supported: send text.",
                param=f"{param}.{index}",
            )
        pieces.append(check_text(part["text"], f"{param}.{index}.text"))
    return "".join(pieces)


def _file_search(tools: list[Any], tool_choice: Any, default_results: int) -> FileSearch | None:
    """The ``file_search`` tool, or None when there is none or ``tool_choice`` is ``none``;
    ``function`` tools are read by ``parse_turn``."""
    searches = []
    for index, tool in enumerate(tools):
        if isinstance(tool, dict) and tool.get("type") == "function":
            continue
        if not isinstance(tool, dict) or tool.get("type") != "file_search":
            kind = tool.get("type") if isinstance(tool, dict) else tool
            raise APIError(
                400, f"Tools of type '{kind}' are not supported.", param=f"tools.{index}"
            )
        searches.append(_search_tool(tool, f"tools.{index}", default_results))
    if len(searches) > 1:
        raise APIError(400, "Send one 'file_search' tool.", param="tools")
    chosen = tool_choice if isinstance(tool_choice, str) else tool_choice.get("type")
    if chosen not in ("auto", "required", "none", "file_search", "function"):
        raise APIError(400, f"'tool_choice' '{chosen}' is not supported.", param="tool_choice")
    functions = any(isinstance(tool, dict) and tool.get("type") == "function" for tool in tools)
    asks_search = chosen == "file_search" or (chosen == "required" and not functions)
    if asks_search and not searches:
        raise APIError(400, "'tool_choice' asks for file_search, which 'tools' lacks.")
    return searches[0] if searches and chosen != "none" else None


def _search_tool(raw: dict[str, Any], param: str, default_results: int) -> FileSearch:
    try:
        tool = FileSearchTool.model_validate(raw)
    except ValidationError as exc:
        raise invalid(exc, param) from None
    if not tool.vector_store_ids:
        raise APIError(400, "'vector_store_ids' is empty.", param=f"{param}.vector_store_ids")
    results = default_results if tool.max_num_results is None else tool.max_num_results
    _check_range(results, f"{param}.max_num_results", 1, MAX_SEARCH_RESULTS)
    options, where = raw.get("ranking_options"), f"{param}.ranking_options"
    ranking = None if options is None else parse_params(RankingOptions, options, where)
    condition = (
        None if raw.get("filters") is None else parse_filter(raw["filters"], f"{param}.filters")
    )
    store_ids = [check_text(i, f"{param}.vector_store_ids") for i in tool.vector_store_ids]
    return FileSearch(store_ids, results, condition, ranking, raw)


def _optional_text(value: str | None, param: str) -> str | None:
    return None if value is None else check_text(value, param)


def _check_range(value: float | None, param: str, low: float, high: float) -> None:
    if value is not None and not low <= value <= high:
        raise APIError(400, f"'{param}' must be between {low} and {high}.", param=param)


def _text_format(text: Any) -> tuple[dict[str, Any], ResponseFormat | None]:
    text = text or {}
    if text.get("verbosity") not in (None, "medium"):
        message = "'text.verbosity' other than 'medium' is not supported by the served model."
        raise APIError(400, message, param="text.verbosity")
    return text_format(text.get("format"))


def _check_answer_options(params: dict[str, Any]) -> None:
    """Options that would change the answer in ways the served model cannot follow."""
    reasoning = params.get("reasoning") or {}
    summaries = reasoning.get("summary") or reasoning.get("generate_summary")
    if reasoning.get("effort") not in (None, "none") or summaries:
        message = "'reasoning' is not supported: the served model does not reason."
        raise APIError(400, message, param="reasoning")
    if params.get("truncation") == "auto":
        message = "'truncation' 'auto' is not supported: a prompt beyond the context is a 400."
        raise APIError(400, message, param="truncation")
