"""Chat messages as the model's chat template reads them, tools and tool turns included.

A template that renders ``tools`` itself (Qwen2.5's, hermes-style) gets them as
``apply_chat_template(..., tools=[...])``, assistant calls with their arguments as objects (as
Hugging Face templates expect) and ``tool`` messages as they are. A template without tool support
(SmolLM2's) would drop them, so ragblend writes them in the same hermes style itself: the tool
signatures in the system message, earlier calls as ``<tool_call>`` JSON in the assistant's text,
and tool results as user turns in ``<tool_response>`` tags. Either way the answer is read with
the hermes parser (``gateway.openai.tools.AUTO_PARSERS``).
"""

from __future__ import annotations

import json
from typing import Any

from gateway.http.errors import APIError
from gateway.openai.protocol import ChatMessage

_PROBE = "ragblend_tool_probe"
_SUPPORT: dict[str, bool] = {}
HERMES_TOOLS = (
    "# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
    "You are provided with function signatures within <tools></tools> XML tags:\n<tools>"
    "{signatures}\n</tools>\n\n"
    "For each function call, return a json object with function name and arguments within "
    "<tool_call></tool_call> XML tags:\n<tool_call>\n"
    '{{"name": <function-name>, "arguments": <args-json-object>}}\n</tool_call>'
)


def template_renders_tools(tokenizer: Any) -> bool:
    """Whether the chat template writes a tool offered to it into the prompt (cached)."""
    template = tokenizer.chat_template or ""
    if template not in _SUPPORT:
        probe = [{"type": "function", "function": {"name": _PROBE, "parameters": {}}}]
        conversation = [{"role": "user", "content": "?"}]
        try:
            text = tokenizer.apply_chat_template(conversation, tools=probe, tokenize=False)
        except Exception:  # a template that trips over tools cannot render them
            text = ""
        _SUPPORT[template] = _PROBE in text
    return _SUPPORT[template]


def render_chat(
    messages: list[ChatMessage],
    tokenizer: Any,
    tools: list[dict[str, Any]] | None = None,
    before_last_user: str = "",
) -> str:
    """The prompt text, ending with the assistant's turn; ``before_last_user`` is placed at
    the start of the last user message's content (where chunks go)."""
    if tokenizer.chat_template is None:
        raise APIError(400, "This model has no chat template; use /v1/completions.")
    native = template_renders_tools(tokenizer)
    conversation = [_message(message, index, native) for index, message in enumerate(messages)]
    if before_last_user:
        last = max(i for i, message in enumerate(messages) if message.role == "user")
        conversation[last]["content"] = before_last_user + conversation[last]["content"]
    if tools and not native:
        conversation = _with_hermes_tools(conversation, tools)
    extra = {"tools": tools} if tools and native else {}
    try:
        return tokenizer.apply_chat_template(
            conversation, add_generation_prompt=True, tokenize=False, **extra
        )
    except Exception as exc:  # the template itself rejects some conversations
        message = f"The chat template rejected the messages: {exc}"
        raise APIError(400, message, param="messages") from exc


def _message(message: ChatMessage, index: int, native: bool) -> dict[str, Any]:
    rendered: dict[str, Any] = {"role": message.role, "content": message.text}
    calls = [
        _call(call, f"messages.{index}.tool_calls.{n}")
        for n, call in enumerate(message.tool_calls or [])
    ]
    if native:
        if calls:
            rendered["tool_calls"] = calls
        if message.tool_call_id is not None:
            rendered["tool_call_id"] = message.tool_call_id
        if message.name is not None:
            rendered["name"] = message.name
        return rendered
    if calls:
        written = "\n".join(_hermes_call(call["function"]) for call in calls)
        rendered["content"] = f"{message.text}\n{written}" if message.text else written
    if message.role == "tool":
        rendered = {"role": "user", "content": f"<tool_response>\n{message.text}\n</tool_response>"}
    return rendered


def _call(call: Any, param: str) -> dict[str, Any]:
    """A call with its arguments as an object, which templates write out with ``tojson``."""
    try:
        arguments = json.loads(call.function.arguments)
    except json.JSONDecodeError:
        arguments = None
    if not isinstance(arguments, dict):
        message = "Tool call arguments must be a JSON object in a string."
        raise APIError(400, message, param=f"{param}.function.arguments")
    function = {"name": call.function.name, "arguments": arguments}
    return {"id": call.id, "type": "function", "function": function}


def _hermes_call(function: dict[str, Any]) -> str:
    return f"<tool_call>\n{json.dumps(function, ensure_ascii=False)}\n</tool_call>"


def _with_hermes_tools(
    conversation: list[dict[str, Any]], tools: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """The tool signatures appended to the system message, or as one when there is none."""
    signatures = "".join("\n" + json.dumps(tool, ensure_ascii=False) for tool in tools)
    block = HERMES_TOOLS.format(signatures=signatures)
    if conversation and conversation[0]["role"] == "system":
        first = conversation[0]
        return [{**first, "content": f"{first['content']}\n\n{block}"}, *conversation[1:]]
    return [{"role": "system", "content": block}, *conversation]
