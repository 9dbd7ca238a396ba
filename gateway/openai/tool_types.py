"""OpenAI's tool shapes on chat requests: function tools, ``tool_choice`` and the assistant's
``tool_calls``. Kept apart from ``protocol`` so messages and requests share them without the
rendering and parsing code that ``gateway.openai.tools`` adds on top."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

NAME_PATTERN = r"^[a-zA-Z0-9_-]{1,64}$"
"""OpenAI's rule for function names."""


class FunctionSpec(BaseModel):
    model_config = ConfigDict(extra="ignore")

    name: str = Field(pattern=NAME_PATTERN)
    description: str | None = None
    parameters: dict[str, Any] | None = None
    strict: bool | None = None


class ToolSpec(BaseModel):
    """``{"type": "function", "function": {...}}``; the only tool type chat serves."""

    model_config = ConfigDict(extra="ignore")

    type: Literal["function"]
    function: FunctionSpec

    def template_dict(self) -> dict[str, Any]:
        """What chat templates read: OpenAI's shape without unset fields."""
        return {"type": "function", "function": self.function.model_dump(exclude_none=True)}


class NamedFunction(BaseModel):
    name: str


class NamedToolChoice(BaseModel):
    """``{"type": "function", "function": {"name": ...}}``: this function must be called."""

    type: Literal["function"]
    function: NamedFunction


ToolChoice = Literal["none", "auto", "required"] | NamedToolChoice


class CalledFunction(BaseModel):
    name: str
    arguments: str
    """The arguments as a JSON object in a string, as OpenAI sends and expects them."""


class ToolCall(BaseModel):
    """One call in an assistant message of the conversation."""

    model_config = ConfigDict(extra="ignore")

    id: str
    type: Literal["function"] = "function"
    function: CalledFunction
