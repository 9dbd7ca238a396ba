"""Structured outputs: OpenAI's ``response_format`` (chat and completions), the Responses API's
``text.format`` and vLLM's own ``structured_outputs`` extension, checked here and handed to
vLLM's grammar backends as one ``StructuredOutputsParams``.

A schema that is not valid JSON Schema is a 400 naming the field before the engine sees it;
what the grammar backend itself rejects is a 400 too (``gateway.openai.sampling``).
"""

from __future__ import annotations

import json
from typing import Any, Literal

from jsonschema import SchemaError
from jsonschema.validators import validator_for
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticCustomError
from vllm.sampling_params import StructuredOutputsParams

from gateway.http.errors import APIError
from gateway.openai.validation import invalid

SCHEMA_NAME = r"^[A-Za-z0-9_-]{1,64}$"
"""OpenAI's rule for ``json_schema.name``."""


def schema_problem(schema: Any) -> str | None:
    """Why ``schema`` is not a JSON Schema (checked against its draft's meta-schema), or None."""
    if not isinstance(schema, dict):
        return "the schema must be a JSON object"
    try:
        validator_for(schema).check_schema(schema)
    except SchemaError as exc:
        return f"not a valid JSON Schema: {exc.message}"
    return None


def _checked_schema(schema: Any) -> Any:
    problem = schema_problem(schema)
    if problem is not None:
        raise PydanticCustomError("invalid_schema", problem)
    return schema


class JSONSchemaFormat(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    name: str = Field(pattern=SCHEMA_NAME)
    description: str | None = None
    schema_: dict[str, Any] | None = Field(None, alias="schema")
    strict: bool | None = None

    @field_validator("schema_")
    @classmethod
    def _schema_valid(cls, value: dict[str, Any] | None) -> dict[str, Any] | None:
        return None if value is None else _checked_schema(value)


class ResponseFormat(BaseModel):
    """``{"type": "text" | "json_object" | "json_schema", "json_schema"?}``."""

    model_config = ConfigDict(extra="forbid")

    type: Literal["text", "json_object", "json_schema"]
    json_schema: JSONSchemaFormat | None = None

    @model_validator(mode="after")
    def _schema_with_its_type(self) -> ResponseFormat:
        if (self.type == "json_schema") != (self.json_schema is not None):
            raise ValueError("json_schema is required with type 'json_schema', and only then")
        return self

    def params(self) -> StructuredOutputsParams | None:
        if self.type == "json_object" or (self.json_schema and self.json_schema.schema_ is None):
            return StructuredOutputsParams(json_object=True)
        if self.json_schema is not None:
            return StructuredOutputsParams(json=self.json_schema.schema_)
        return None


def _parsed_schema(value: Any) -> Any:
    """vLLM takes the schema as an object or as its JSON text."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            raise PydanticCustomError("invalid_schema", "the schema is not valid JSON") from None
    return _checked_schema(value)


class StructuredOutputsOptions(BaseModel):
    """vLLM's request extension: exactly one of ``json``, ``regex``, ``choice``, ``grammar``,
    ``json_object``. vLLM's per-request whitespace options are refused: its xgrammar backend
    reads only the engine's setting (compact JSON, ``engine/runtime.py``)."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    json_: dict[str, Any] | str | None = Field(None, alias="json")
    regex: str | None = Field(None, min_length=1)
    choice: list[str] | None = Field(None, min_length=1)
    grammar: str | None = Field(None, min_length=1)
    json_object: Literal[True] | None = None

    @field_validator("json_")
    @classmethod
    def _schema_valid(cls, value: dict[str, Any] | str | None) -> Any:
        return None if value is None else _parsed_schema(value)

    @model_validator(mode="after")
    def _one_constraint(self) -> StructuredOutputsOptions:
        constraints = (self.json_, self.regex, self.choice, self.grammar, self.json_object)
        if sum(value is not None for value in constraints) != 1:
            raise ValueError("set exactly one of json, regex, choice, grammar, json_object")
        if self.regex is not None and "\x00" in self.regex:
            raise ValueError("regex must not contain a NUL character")
        return self

    def params(self) -> StructuredOutputsParams:
        return StructuredOutputsParams(
            json=self.json_,
            regex=self.regex,
            choice=self.choice,
            grammar=self.grammar,
            json_object=self.json_object,
        )


def structured_outputs(
    response_format: ResponseFormat | None, options: StructuredOutputsOptions | None
) -> tuple[StructuredOutputsParams | None, str]:
    """The constraint and the request field it came from (what an engine refusal names)."""
    from_format = None if response_format is None else response_format.params()
    if from_format is not None and options is not None:
        message = "Send either response_format or structured_outputs, not both."
        raise APIError(400, message, param="structured_outputs")
    if options is not None:
        return options.params(), "structured_outputs"
    return from_format, "response_format"


def text_format(raw: Any) -> tuple[dict[str, Any], ResponseFormat | None]:
    """The Responses API's ``text.format`` (its schema fields sit beside ``type``): the format as
    the response echoes it, and the same as a chat ``response_format``."""
    if raw is None:
        return {"type": "text"}, None
    if not isinstance(raw, dict) or raw.get("type") not in ("text", "json_object", "json_schema"):
        message = "'text.format.type' must be 'text', 'json_object' or 'json_schema'."
        raise APIError(400, message, param="text.format.type")
    if raw["type"] != "json_schema":
        return {"type": raw["type"]}, ResponseFormat(type=raw["type"])
    fields = {key: value for key, value in raw.items() if key != "type"}
    try:
        schema = JSONSchemaFormat.model_validate(fields)
    except ValidationError as exc:
        raise invalid(exc, "text.format") from None
    echoed = {"type": "json_schema", **schema.model_dump(by_alias=True, exclude_none=True)}
    return echoed, ResponseFormat(type="json_schema", json_schema=schema)
