"""A request's function tools as ragblend serves them: checked (400s naming the field), the
``tool_choice`` resolved, the JSON schema that guided decoding enforces for ``required`` and a
named function, and the vLLM tool parser that reads ``auto`` answers.

``none`` offers no tools and parses nothing, so the model answers in text. ``required`` and a
named function constrain decoding to JSON (vLLM's structured outputs), exactly as vLLM's own
OpenAI server does: an array of ``{"name", "parameters"}`` objects, or the named function's
arguments object; those answers are read as JSON, not by the model's parser.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from jsonschema import SchemaError
from jsonschema.validators import validator_for
from vllm.sampling_params import StructuredOutputsParams

from gateway.http.errors import APIError
from gateway.openai.tool_types import NamedToolChoice, ToolChoice, ToolSpec

AUTO = "auto"
HERMES = "hermes"
AUTO_PARSERS: dict[str, str] = {
    "qwen2.5-coder-0.5b-instruct": HERMES,
    "qwen2.5-coder-1.5b-instruct": HERMES,
    "smollm2-135m-instruct": HERMES,
}
"""``RAGBLEND_TOOL_PARSER=auto`` per served model. Qwen2.5 is trained on hermes-style
``<tool_call>`` JSON; SmolLM2's template has no tools, so ragblend writes the hermes prompt for it
(``gateway.openai.tool_prompt``) and reads the answer the same way. Other models: hermes too."""


def parser_name(setting: str, model: str) -> str:
    """The vLLM tool parser for ``model`` under ``RAGBLEND_TOOL_PARSER``."""
    if setting != AUTO:
        return setting
    return AUTO_PARSERS.get(model, HERMES)


@dataclass(frozen=True)
class ToolCalling:
    """What the prompt offers and how the answer is read; only built when tools are in play."""

    tools: tuple[ToolSpec, ...]
    choice: Literal["auto", "required", "named"]
    parallel: bool
    parser: str
    """The vLLM tool parser's name, for ``auto``."""
    function: str | None = None
    """The function a named ``tool_choice`` forces."""
    from_text: bool = False
    """``auto``: also read calls written as plain JSON text (`gateway.openai.text_calls`)."""

    def template_tools(self) -> list[dict[str, Any]]:
        return [tool.template_dict() for tool in self.tools]

    def guided_schema(self) -> dict[str, Any] | None:
        """The JSON schema decoding must follow; None for ``auto``."""
        if self.choice == "named":
            spec = next(tool for tool in self.tools if tool.function.name == self.function)
            return _arguments_schema(spec)
        if self.choice == "auto":
            return None
        schema: dict[str, Any] = {
            "type": "array",
            "minItems": 1,
            "items": {"type": "object", "anyOf": [_call_schema(tool) for tool in self.tools]},
        }
        if not self.parallel:
            schema["maxItems"] = 1
        definitions = _shared_definitions(self.tools)
        if definitions:
            schema["$defs"] = definitions
        return schema

    def structured_outputs(self) -> StructuredOutputsParams | None:
        """Compact JSON: small models otherwise spend their tokens on the whitespace the
        grammar allows and run out before the call closes."""
        schema = self.guided_schema()
        if schema is None:
            return None
        return StructuredOutputsParams(json=schema, disable_any_whitespace=True)


def tool_calling(
    tools: Sequence[ToolSpec] | None,
    choice: ToolChoice | None,
    parallel: bool,
    parser: str,
    prefixes: Sequence[str] | None = None,
    from_text: bool = False,
) -> ToolCalling | None:
    """Check the tools (``prefixes`` name each tool's field in errors, by default chat's
    ``tools.N.function``) and resolve ``tool_choice``; None when no tool is offered.
    ``from_text``: see `ToolCalling.from_text`."""
    tools = list(tools or [])
    prefixes = list(prefixes or [f"tools.{index}.function" for index in range(len(tools))])
    check_tools(tools, prefixes)
    if choice is None:
        choice = AUTO if tools else "none"
    if choice != "none" and not tools:
        raise APIError(400, "'tool_choice' needs 'tools' to choose from.", param="tool_choice")
    if choice == "none":
        return None
    if isinstance(choice, NamedToolChoice):
        name = choice.function.name
        if all(tool.function.name != name for tool in tools):
            message = f"'tool_choice' names the function '{name}', which 'tools' lacks."
            raise APIError(400, message, param="tool_choice")
        return ToolCalling(tuple(tools), "named", parallel, parser, name)
    return ToolCalling(tuple(tools), choice, parallel, parser, from_text=from_text)


def check_tools(tools: Sequence[ToolSpec], prefixes: Sequence[str]) -> None:
    """Unique names and parameters that are valid JSON schemas of an object."""
    seen: set[str] = set()
    definitions: dict[str, Any] = {}
    for tool, prefix in zip(tools, prefixes, strict=True):
        name = tool.function.name
        if name in seen:
            raise APIError(400, f"Two tools are named '{name}'.", param=f"{prefix}.name")
        seen.add(name)
        schema = tool.function.parameters
        if schema is None:
            continue
        param = f"{prefix}.parameters"
        if schema.get("type", "object") != "object":
            raise APIError(400, "Function parameters must be an object schema.", param=param)
        try:
            validator_for(schema).check_schema(schema)
        except SchemaError as exc:
            message = f"'{name}' has an invalid parameters schema: {exc.message}"
            raise APIError(400, message, param=param) from None
        for key, value in (schema.get("$defs") or {}).items():
            if definitions.setdefault(key, value) != value:
                message = f"Tools define '$defs/{key}' differently; give them distinct names."
                raise APIError(400, message, param=f"{param}.$defs")


def _shared_definitions(tools: Sequence[ToolSpec]) -> dict[str, Any]:
    """Each tool's ``$defs`` at the root, where its ``#/$defs/...`` references point once the
    tools sit inside one array schema (checked to agree by ``check_tools``)."""
    definitions: dict[str, Any] = {}
    for tool in tools:
        definitions.update((tool.function.parameters or {}).get("$defs") or {})
    return definitions


def _arguments_schema(tool: ToolSpec) -> dict[str, Any]:
    """A function without parameters still takes a JSON object."""
    return tool.function.parameters or {"type": "object", "properties": {}}


def _call_schema(tool: ToolSpec) -> dict[str, Any]:
    return {
        "properties": {
            "name": {"type": "string", "enum": [tool.function.name]},
            "parameters": _arguments_schema(tool),
        },
        "required": ["name", "parameters"],
    }
