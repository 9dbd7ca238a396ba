"""Request bodies of the OpenAI completions and chat completions APIs that ragblend serves."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    field_validator,
    model_validator,
)

from gateway.http.errors import APIError
from gateway.openai import field_policy as policy
from gateway.openai.rag_fields import (
    MAX_DOCUMENTS,
    BlendOptions,
    Document,
    RetrievalOptions,
    TitledDocument,
)
from gateway.openai.structured import ResponseFormat, StructuredOutputsOptions
from gateway.openai.text import Text
from gateway.openai.tool_types import ToolCall, ToolChoice, ToolSpec
from gateway.openai.validation import check_metadata

MAX_STOP_SEQUENCES = 4
MAX_IDS = 64
"""Most ``stop_token_ids`` per request."""
MAX_REPETITION_PENALTY = 2.0**31
"""Finite, as vLLM's sampler needs it."""
TokenId = Annotated[str, Field(pattern=r"^[0-9]{1,9}$")]
"""A ``logit_bias`` key: a token id written as a string, as JSON object keys are."""
SEED_MIN, SEED_MAX = -(2**63), 2**63 - 1
"""vLLM seeds torch's generator with a 64-bit signed integer, as its own server bounds them."""


class StreamOptions(BaseModel):
    include_usage: bool = False


class SamplingFields(BaseModel):
    """Parameters both endpoints share. Unset sampling fields take the model's
    ``generation_config.json`` defaults, then OpenAI's (``gateway.openai.sampling``); an
    unknown field is a 400 (``gateway.openai.field_policy``)."""

    model_config = ConfigDict(extra="forbid")

    model: Text
    max_tokens: int | None = Field(None, ge=1)
    temperature: float | None = Field(None, ge=0.0, le=2.0)
    top_p: float | None = Field(None, gt=0.0, le=1.0)
    n: int = Field(1, ge=1, le=16)
    stop: Text | list[Text] | None = None
    seed: int | None = Field(None, ge=SEED_MIN, le=SEED_MAX)
    presence_penalty: float | None = Field(None, ge=-2.0, le=2.0)
    frequency_penalty: float | None = Field(None, ge=-2.0, le=2.0)
    logit_bias: dict[TokenId, Annotated[float, Field(ge=-100.0, le=100.0)]] | None = None
    top_k: int | None = Field(None, ge=-1)
    min_p: float | None = Field(None, ge=0.0, le=1.0)
    repetition_penalty: float | None = Field(None, gt=0.0, le=MAX_REPETITION_PENALTY)
    stop_token_ids: list[Annotated[int, Field(ge=0)]] | None = Field(None, max_length=MAX_IDS)
    min_tokens: int = Field(0, ge=0)
    ignore_eos: bool = False
    response_format: ResponseFormat | None = None
    structured_outputs: StructuredOutputsOptions | None = None
    stream: bool = False
    stream_options: StreamOptions | None = None
    user: Text | None = None
    metadata: dict[str, Any] | None = None
    store: bool | None = None
    service_tier: str | None = None
    documents: list[Document] | None = Field(None, max_length=MAX_DOCUMENTS)
    blend: BlendOptions | None = None
    retrieval: RetrievalOptions | None = None

    @model_validator(mode="before")
    @classmethod
    def _known_fields(cls, data: Any) -> Any:
        return policy.without_nulls(data)

    @field_validator("metadata")
    @classmethod
    def _metadata(cls, value: dict[str, Any] | None) -> dict[str, Any] | None:
        try:
            return None if value is None else check_metadata(value)
        except APIError as exc:
            raise ValueError(exc.message) from None

    @property
    def document_texts(self) -> list[str] | None:
        """Each sent document as its chunk's text."""
        if self.documents is None:
            return None
        return [d if isinstance(d, str) else d.chunk_text() for d in self.documents]

    @field_validator("documents")
    @classmethod
    def _documents_have_text(
        cls, value: list[str | TitledDocument] | None
    ) -> list[str | TitledDocument] | None:
        for document in value or []:
            text = document if isinstance(document, str) else document.text
            if not text.strip():
                raise ValueError("documents must not be empty (a title needs its text)")
        return value

    @model_validator(mode="after")
    def _documents_or_retrieval(self) -> SamplingFields:
        if self.documents is not None and self.retrieval is not None:
            raise ValueError("send either documents or retrieval, not both")
        return self

    @field_validator("stop")
    @classmethod
    def _stop_sequences(cls, value: str | list[str] | None) -> list[str]:
        sequences = [value] if isinstance(value, str) else list(value or [])
        if len(sequences) > MAX_STOP_SEQUENCES:
            raise ValueError(f"at most {MAX_STOP_SEQUENCES} stop sequences are allowed")
        if any(not sequence for sequence in sequences):
            raise ValueError("stop sequences must not be empty")
        return sequences

    @model_validator(mode="after")
    def _options_need_stream(self) -> SamplingFields:
        if self.stream_options is not None and not self.stream:
            raise ValueError("stream_options is only allowed when stream is true")
        if self.max_tokens is not None and self.min_tokens > self.max_tokens:
            raise ValueError("min_tokens must not exceed max_tokens")
        return self

    @property
    def include_usage(self) -> bool:
        return self.stream_options is not None and self.stream_options.include_usage


PromptInput = Text | list[Text] | list[int] | list[list[int]]


class CompletionRequest(SamplingFields):
    prompt: PromptInput
    logprobs: int | None = Field(None, ge=0, le=20)
    echo: policy.Echo
    best_of: policy.BestOf
    suffix: policy.Suffix

    @field_validator("prompt")
    @classmethod
    def _non_empty(cls, value: PromptInput) -> PromptInput:
        if isinstance(value, str):
            empty = not value
        else:
            empty = not value or any(not item for item in value if not isinstance(item, int))
        if empty:
            raise ValueError("prompt must not be empty")
        return value


class TextPart(BaseModel):
    type: Literal["text"]
    text: Text


class ChatMessage(BaseModel):
    model_config = ConfigDict(extra="ignore")

    role: Literal["system", "developer", "user", "assistant", "tool"]
    content: Text | list[TextPart] | None = None
    name: Text | None = None
    tool_calls: list[ToolCall] | None = None
    """An earlier answer's calls (assistant messages only)."""
    tool_call_id: Text | None = None
    """The call a ``tool`` message answers."""

    @model_validator(mode="after")
    def _tool_fields_fit_the_role(self) -> ChatMessage:
        if self.tool_calls and self.role != "assistant":
            raise ValueError("only assistant messages carry tool_calls")
        if self.role == "tool" and not self.tool_call_id:
            raise ValueError("tool messages need the tool_call_id they answer")
        return self

    @property
    def text(self) -> str:
        if isinstance(self.content, list):
            return "".join(part.text for part in self.content)
        return self.content or ""


class ChatCompletionRequest(SamplingFields):
    messages: list[ChatMessage] = Field(min_length=1)
    max_completion_tokens: int | None = Field(None, ge=1)
    logprobs: bool = False
    top_logprobs: int | None = Field(None, ge=0, le=20)
    reasoning_effort: policy.ReasoningEffort
    verbosity: policy.Verbosity
    audio: policy.Audio
    modalities: policy.Modalities
    prediction: policy.Prediction
    web_search_options: policy.WebSearchOptions
    functions: policy.Functions
    function_call: policy.FunctionCall
    moderation: policy.Moderation
    prompt_cache_key: Text | None = None
    prompt_cache_retention: str | None = None
    prompt_cache_options: dict[str, Any] | None = None
    safety_identifier: Text | None = None
    tools: list[ToolSpec] | None = Field(None, max_length=128)
    tool_choice: ToolChoice | None = None
    """Unset: ``auto`` with tools, ``none`` without, as OpenAI defaults it."""
    parallel_tool_calls: bool = True

    @model_validator(mode="after")
    def _token_limit_and_logprobs(self) -> ChatCompletionRequest:
        if self.max_tokens is None:
            self.max_tokens = self.max_completion_tokens
        if self.top_logprobs is not None and not self.logprobs:
            raise ValueError("top_logprobs requires logprobs to be true")
        return self
