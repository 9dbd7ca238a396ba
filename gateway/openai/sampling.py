"""Map OpenAI sampling fields to vLLM ``SamplingParams``, as ``vllm serve`` does.

A field the request leaves unset takes the model's ``generation_config.json`` default
(``vllm serve``'s ``--generation-config auto``), then OpenAI's. Token ids are checked against
the vocabulary, and vLLM's own checks (structured outputs' schema or grammar included) run
here, so every refusal is a 400 naming its field before a stream starts.
"""

from __future__ import annotations

from typing import Any, Protocol

from vllm import SamplingParams
from vllm.exceptions import VLLMValidationError
from vllm.sampling_params import RequestOutputKind, StructuredOutputsParams

from gateway.http.errors import APIError
from gateway.openai.protocol import SamplingFields
from gateway.openai.structured import structured_outputs

OPENAI_DEFAULTS: dict[str, float] = {
    "temperature": 1.0,
    "top_p": 1.0,
    "top_k": 0,
    "min_p": 0.0,
    "repetition_penalty": 1.0,
    "presence_penalty": 0.0,
    "frequency_penalty": 0.0,
}
"""Every sampling field a model's generation config may set, with OpenAI's (neutral) default."""


class SamplingEngine(Protocol):
    """What the engine tells the mapping: its limits, the model's defaults, vLLM's checks."""

    @property
    def max_logprobs(self) -> int: ...

    @property
    def vocab_size(self) -> int: ...

    @property
    def sampling_defaults(self) -> dict[str, Any]: ...

    def verify(self, params: SamplingParams) -> None: ...


def default_max_tokens(engine: SamplingEngine, server_default: int) -> int:
    """Tokens to generate when the request does not say: the model's ``max_new_tokens``, else
    the server's ``RAGBLEND_MAX_TOKENS_DEFAULT``."""
    return int(engine.sampling_defaults.get("max_tokens", server_default))


def sampling_params(
    fields: SamplingFields,
    max_tokens: int,
    logprobs: int | None,
    engine: SamplingEngine,
    tool_constraint: StructuredOutputsParams | None = None,
) -> SamplingParams:
    """``tool_constraint`` forces decoding to a tool call (a required or named ``tool_choice``);
    it takes the place of the request's own structured output."""
    if logprobs is not None and logprobs > engine.max_logprobs:
        raise APIError(400, f"logprobs may be at most {engine.max_logprobs}.", param="logprobs")
    chosen = _with_defaults(fields, engine.sampling_defaults)
    if fields.n > 1 and chosen["temperature"] == 0:
        message = "n > 1 needs temperature > 0 (greedy choices would be identical)."
        raise APIError(400, message, param="n")
    if fields.min_tokens > max_tokens:
        message = f"min_tokens ({fields.min_tokens}) exceeds max_tokens ({max_tokens})."
        raise APIError(400, message, param="min_tokens")
    _check_token_ids(fields, engine.vocab_size)
    constraint, constraint_field = structured_outputs(
        fields.response_format, fields.structured_outputs
    )
    if tool_constraint is not None:
        constraint, constraint_field = tool_constraint, "tool_choice"
    try:
        params = SamplingParams(
            n=fields.n,
            **chosen,
            max_tokens=max_tokens,
            min_tokens=fields.min_tokens,
            stop=fields.stop or None,
            stop_token_ids=fields.stop_token_ids,
            ignore_eos=fields.ignore_eos,
            seed=fields.seed,
            logit_bias=_logit_bias(fields.logit_bias),
            logprobs=logprobs,
            structured_outputs=constraint,
            output_kind=RequestOutputKind.DELTA,
        )
        engine.verify(params)
    except (VLLMValidationError, ValueError) as exc:
        param = constraint_field if constraint is not None else None
        raise APIError(400, str(exc), param=getattr(exc, "parameter", None) or param) from exc
    return params


def _with_defaults(fields: SamplingFields, model_defaults: dict[str, Any]) -> dict[str, Any]:
    """Request value, else the model's default, else OpenAI's."""
    chosen = {}
    for name, default in OPENAI_DEFAULTS.items():
        given = getattr(fields, name)
        chosen[name] = given if given is not None else model_defaults.get(name, default)
    return chosen


def _logit_bias(bias: dict[str, float] | None) -> dict[int, float] | None:
    return None if not bias else {int(token): value for token, value in bias.items()}


def _check_token_ids(fields: SamplingFields, vocab_size: int) -> None:
    for name, ids in (
        ("logit_bias", [int(token) for token in fields.logit_bias or {}]),
        ("stop_token_ids", fields.stop_token_ids or []),
    ):
        outside = [token for token in ids if token >= vocab_size]
        if outside:
            message = f"{name} has token ids outside the vocabulary (size {vocab_size}): {outside}"
            raise APIError(400, message, param=name)
