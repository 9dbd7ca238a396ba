"""``POST /tokenize`` and ``POST /detokenize``: vLLM's own utility routes, in vLLM's shapes.

Clients written for vLLM count a prompt's tokens before sending it, or turn token ids back into
text. The completion form (``prompt``) tokenizes as ``/v1/completions`` does; the chat form
(``messages``) renders the model's chat template, and with its defaults gives exactly the ids
``/v1/chat/completions`` sends to the engine.
"""

from __future__ import annotations

from typing import Annotated, Any, TypeVar

from fastapi import APIRouter, Depends, Request
from pydantic import BaseModel, Field, ValidationError

from gateway.http.errors import APIError
from gateway.openai.protocol import ChatMessage, Text
from gateway.openai.validation import invalid
from gateway.rag.prompts import chat_prompt
from gateway.routes.deps import JSONBody
from gateway.state import AppState, authorized, check_model, ready_state

router = APIRouter(dependencies=[Depends(authorized)])


class TokenizeCompletionRequest(BaseModel):
    model: str | None = None
    prompt: Text
    add_special_tokens: bool = True
    return_token_strs: bool = False


class TokenizeChatRequest(BaseModel):
    model: str | None = None
    messages: list[ChatMessage] = Field(min_length=1)
    add_generation_prompt: bool = True
    add_special_tokens: bool = False
    """Special tokens on top of those the chat template writes; vLLM's default, off."""
    return_token_strs: bool = False


class DetokenizeRequest(BaseModel):
    model: str | None = None
    tokens: list[Annotated[int, Field(ge=0)]]


Parsed = TypeVar("Parsed", bound=BaseModel)


def _parsed(model: type[Parsed], body: Any) -> Parsed:
    try:
        return model.model_validate(body)
    except ValidationError as exc:
        raise invalid(exc) from None


def _checked_state(request: Request, model: str | None) -> AppState:
    state = ready_state(request)
    if model is not None:
        check_model(model, state)
    return state


@router.post("/tokenize")
async def tokenize(request: Request, body: JSONBody) -> dict[str, Any]:
    chat = isinstance(body, dict) and "messages" in body
    parsed = _parsed(TokenizeChatRequest if chat else TokenizeCompletionRequest, body)
    state = _checked_state(request, parsed.model)
    engine = state.ready_engine()
    tokenizer = state.tokenizer
    if isinstance(parsed, TokenizeChatRequest):
        tokens = _chat_tokens(parsed, tokenizer)
    else:
        tokens = tokenizer.encode(parsed.prompt, add_special_tokens=parsed.add_special_tokens)
    strings = tokenizer.convert_ids_to_tokens(tokens) if parsed.return_token_strs else None
    return {
        "count": len(tokens),
        "max_model_len": engine.max_model_len,
        "tokens": tokens,
        "token_strs": strings,
    }


def _chat_tokens(body: TokenizeChatRequest, tokenizer: Any) -> list[int]:
    if body.add_generation_prompt and not body.add_special_tokens:
        return chat_prompt(body.messages, tokenizer)  # what the chat route sends
    if tokenizer.chat_template is None:
        raise APIError(400, "This model has no chat template; tokenize a 'prompt' instead.")
    conversation = [{"role": message.role, "content": message.text} for message in body.messages]
    try:
        text = tokenizer.apply_chat_template(
            conversation, add_generation_prompt=body.add_generation_prompt, tokenize=False
        )
    except Exception as exc:  # the template itself rejects some conversations
        message = f"The chat template rejected the messages: {exc}"
        raise APIError(400, message, param="messages") from exc
    return tokenizer.encode(text, add_special_tokens=body.add_special_tokens)


@router.post("/detokenize")
async def detokenize(request: Request, body: JSONBody) -> dict[str, str]:
    parsed = _parsed(DetokenizeRequest, body)
    state = _checked_state(request, parsed.model)
    vocab = state.ready_engine().vocab_size
    bad = next((token for token in parsed.tokens if token >= vocab), None)
    if bad is not None:
        message = f"Token id {bad} is outside the vocabulary (0..{vocab - 1})."
        raise APIError(400, message, param="tokens")
    return {"prompt": state.tokenizer.decode(parsed.tokens)}
