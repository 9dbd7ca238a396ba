"""Map OpenAI sampling fields to vLLM ``SamplingParams``."""

from __future__ import annotations

from vllm import SamplingParams
from vllm.exceptions import VLLMValidationError
from vllm.sampling_params import RequestOutputKind, StructuredOutputsParams

from gateway.http.errors import APIError
from gateway.openai.protocol import SamplingFields


def sampling_params(
    fields: SamplingFields,
    max_tokens: int,
    logprobs: int | None,
    max_logprobs: int,
    structured_outputs: StructuredOutputsParams | None = None,
) -> SamplingParams:
    """``structured_outputs`` constrains decoding (a required or named ``tool_choice``)."""
    if logprobs is not None and logprobs > max_logprobs:
        raise APIError(400, f"logprobs may be at most {max_logprobs}.", param="logprobs")
    if fields.n > 1 and fields.temperature == 0:
        message = "n > 1 needs temperature > 0 (greedy choices would be identical)."
        raise APIError(400, message, param="n")
    try:
        return SamplingParams(
            n=fields.n,
            temperature=fields.temperature,
            top_p=fields.top_p,
            max_tokens=max_tokens,
            stop=fields.stop or None,
            seed=fields.seed,
            presence_penalty=fields.presence_penalty,
            frequency_penalty=fields.frequency_penalty,
            logprobs=logprobs,
            structured_outputs=structured_outputs,
            output_kind=RequestOutputKind.DELTA,
        )
    except (VLLMValidationError, ValueError) as exc:
        raise APIError(400, str(exc)) from exc
