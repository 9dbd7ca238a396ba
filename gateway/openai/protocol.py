"""Request bodies of the OpenAI completions and chat completions APIs that ragblend serves."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, field_validator, model_validator
from pydantic_core import PydanticCustomError

from engine.contract import Metric
from gateway.http.errors import LONE_SURROGATE
from gateway.openai.tool_types import ToolCall, ToolChoice, ToolSpec

MAX_STOP_SEQUENCES = 4
SEED_MIN, SEED_MAX = -(2**63), 2**63 - 1
"""vLLM seeds torch's generator with a 64-bit signed integer, as its own server bounds them."""


def _valid_unicode(text: str) -> str:
    """JSON's ``\\ud800`` escapes decode to lone surrogates, which no tokenizer can encode."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise PydanticCustomError(
            LONE_SURROGATE,
            "text must be valid Unicode; it contains a lone surrogate at position {position}",
            {"position": exc.start},
        ) from None
    return text


Text = Annotated[str, AfterValidator(_valid_unicode)]


class StreamOptions(BaseModel):
    include_usage: bool = False


MAX_DOCUMENTS = 64


class BlendOptions(BaseModel):
    """Per-request blending; unset fields take the server defaults."""

    model_config = ConfigDict(extra="forbid")

    mode: Literal["blend", "reuse", "full"] | None = None
    recompute_ratio: float | None = Field(None, ge=0.0, le=1.0)
    metric: Metric | None = None
    """What picks the tokens to recompute (``RAGBLEND_BLEND_METRIC``'s values): a summarizing
    client may prefer ``v`` where the server's default for library chunks is ``probe``."""


class RetrievalOptions(BaseModel):
    """Retrieve chunks from the ingested documents; they become the request's documents."""

    model_config = ConfigDict(extra="forbid")

    top_k: int = Field(6, ge=1, le=MAX_DOCUMENTS)
    min_score: float | None = Field(None, ge=-1.0, le=1.0)
    document_ids: list[Text] | None = Field(None, min_length=1)


class SamplingFields(BaseModel):
    """Parameters both endpoints share; unknown fields are ignored as vLLM's server does."""

    model_config = ConfigDict(extra="ignore")

    model: Text
    max_tokens: int | None = Field(None, ge=1)
    temperature: float = Field(1.0, ge=0.0, le=2.0)
    top_p: float = Field(1.0, gt=0.0, le=1.0)
    n: int = Field(1, ge=1, le=16)
    stop: Text | list[Text] | None = None
    seed: int | None = Field(None, ge=SEED_MIN, le=SEED_MAX)
    presence_penalty: float = Field(0.0, ge=-2.0, le=2.0)
    frequency_penalty: float = Field(0.0, ge=-2.0, le=2.0)
    stream: bool = False
    stream_options: StreamOptions | None = None
    user: Text | None = None
    documents: list[Text] | None = Field(None, max_length=MAX_DOCUMENTS)
    blend: BlendOptions | None = None
    retrieval: RetrievalOptions | None = None

    @field_validator("documents")
    @classmethod
    def _documents_have_text(cls, value: list[str] | None) -> list[str] | None:
        if value is not None and any(not document.strip() for document in value):
            raise ValueError("documents must not be empty")
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
        return self

    @property
    def include_usage(self) -> bool:
        return self.stream_options is not None and self.stream_options.include_usage


PromptInput = Text | list[Text] | list[int] | list[list[int]]


class CompletionRequest(SamplingFields):
    prompt: PromptInput
    logprobs: int | None = Field(None, ge=0, le=20)
    echo: Literal[False] = False

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
