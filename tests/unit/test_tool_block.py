"""A chat prompt's tool catalog as a chunk: found whatever the template, tokenized alone so its
ids are the same behind any system prompt, the prompt still the template's very text; and what
the response says of where its KV came from."""

from __future__ import annotations

import json

import pytest
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import PreTrainedTokenizerFast

from engine.contract import BlendPlan, BlendStats, ChunkSpan, Recipe
from gateway.openai.protocol import ChatMessage
from gateway.openai.tool_prompt import render_chat
from gateway.rag.blending import blend_summary
from gateway.rag.chunked_prompt import chat_with_chunks, chat_with_tools, document_chunks
from gateway.rag.passage_index import FoundPassage
from gateway.rag.pasted_prompt import split_prompt
from gateway.rag.tool_block import tool_block

NATIVE = (
    "{%- if tools %}<|system|>{% if messages[0].role == 'system' %}{{ messages[0].content }}"
    "{% else %}You are a helpful assistant.{% endif %}\n\n# Tools\n<tools>"
    "{% for tool in tools %}\n{{ tool | tojson }}{% endfor %}\n</tools><|end|>\n"
    "{%- elif messages[0].role == 'system' %}<|system|>{{ messages[0].content }}<|end|>\n"
    "{%- endif %}{% for m in messages %}{% if m.role != 'system' %}"
    "<|{{ m.role }}|>{{ m.content }}<|end|>\n{% endif %}{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>{% endif %}"
)
WITHOUT_TOOLS = (
    "{% for m in messages %}<|{{ m.role }}|>{{ m.content }}<|end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>{% endif %}"
)
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": name,
            "description": f"{name.replace('_', ' ')} for a city and a day.",
            "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string"}, "day": {"type": "string"}},
                "required": ["city"],
            },
        },
    }
    for name in ("get_weather", "book_flight", "find_hotel")
]
SYSTEMS = ["You are terse. Today is Monday.", "Answer as a pirate would.\n"]


def _tokenizer(template: str) -> PreTrainedTokenizerFast:
    """A byte-level BPE trained on the prompts' own text, so its merges cross the catalog's
    edges: tokenizing the whole prompt at once would differ from piece by piece."""
    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    bpe.decoder = decoders.ByteLevel()
    text = "\n\n".join([*SYSTEMS, *(json.dumps(tool) for tool in TOOLS), "# Tools <tools>"])
    trainer = trainers.BpeTrainer(
        vocab_size=500, initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
    )
    bpe.train_from_iterator([text] * 20, trainer)
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=bpe)
    tokenizer.chat_template = template
    return tokenizer


@pytest.fixture(scope="module", params=[NATIVE, WITHOUT_TOOLS], ids=["native", "hermes"])
def tokenizer(request: pytest.FixtureRequest) -> PreTrainedTokenizerFast:
    return _tokenizer(request.param)


def _messages(system: str | None, question: str = "Weather in Oslo?") -> list[ChatMessage]:
    head = [] if system is None else [ChatMessage(role="system", content=system)]
    return [*head, ChatMessage(role="user", content=question)]


def test_the_catalog_is_one_span_with_the_same_ids_behind_any_system_prompt(tokenizer) -> None:
    catalogs = []
    for system in [*SYSTEMS, None]:
        messages = _messages(system)
        prompt = chat_with_tools(messages, tokenizer, TOOLS)
        assert prompt.tool_span == 0 and len(prompt.spans) == 1
        assert tokenizer.decode(prompt.token_ids) == render_chat(messages, tokenizer, TOOLS)
        span = prompt.spans[0]
        catalogs.append(prompt.token_ids[span.start : span.end])
        assert span.start > 0 and "get_weather" in tokenizer.decode(catalogs[-1])
    assert catalogs[0] == catalogs[1] == catalogs[2]
    assert tokenizer.decode(catalogs[0]).startswith("# Tools")


def test_a_request_without_tools_has_no_span(tokenizer) -> None:
    prompt = chat_with_tools(_messages(SYSTEMS[0]), tokenizer, None)
    assert prompt.spans == () and prompt.tool_span is None
    assert tool_block(tokenizer, []) is None


def test_a_template_writing_the_tools_twice_gives_no_block() -> None:
    twice = NATIVE.replace(
        "<|assistant|>", "<|assistant|>{% for t in tools or [] %}{{ t | tojson }}{% endfor %}"
    )
    assert tool_block(_tokenizer(twice), TOOLS) is None


def test_documents_follow_the_catalog_and_the_chunk_spans_leave_it_out(tokenizer) -> None:
    chunks = document_chunks(["Oslo lies on a fjord.", "Bergen is rainy."], tokenizer)
    prompt = chat_with_chunks(_messages(SYSTEMS[0]), chunks, tokenizer, TOOLS)
    assert prompt.tool_span == 0 and len(prompt.spans) == 3
    assert prompt.chunk_spans == prompt.spans[1:]
    first = prompt.chunk_spans[0]
    assert prompt.token_ids[first.start : first.end] == chunks.token_ids[0]


def test_a_pasted_passage_before_the_catalog_keeps_its_place(tokenizer) -> None:
    passage = "Oslo lies on a fjord and has long winters, short summers and many museums."
    messages = _messages(f"Context: {passage}")
    text = render_chat(messages, tokenizer, TOOLS)
    start = text.index(passage)
    block = tool_block(tokenizer, TOOLS)
    assert block is not None
    block_start = text.index(block)
    found = [FoundPassage(start, start + len(passage), "sent")]
    inside = FoundPassage(block_start + 3, block_start + 80, "sent")  # overlaps: dropped
    prompt, placed = split_prompt(
        text, [*found, inside], tokenizer, [], (block_start, block_start + len(block))
    )
    assert placed == tuple(found) and prompt.tool_span == 1 and len(prompt.spans) == 2
    assert tokenizer.decode(prompt.token_ids) == text


def _summary(stats: BlendStats | None, cached_tokens: int) -> dict:
    plan = BlendPlan(Recipe("blend", 0.15, "probe"), (ChunkSpan(10, 500), ChunkSpan(510, 600)))
    return blend_summary(plan, stats, 700, cached_tokens, "tools", tool_span=0)["tool_block"]


def _stats(
    hit_positions: tuple[int, ...], prefix_cached: int = 0, fell_back: bool = False
) -> BlendStats:
    return BlendStats(
        "blend", 400, 100, len(hit_positions), 2 - len(hit_positions), prefix_cached, fell_back,
        hit_positions=hit_positions,
    )  # fmt: skip


def test_the_summary_says_where_the_catalogs_kv_came_from() -> None:
    assert _summary(_stats((0,)), 490) == {"tokens": 490, "source": "chunk_store"}
    assert _summary(_stats((1,)), 90) == {"tokens": 490, "source": "computed"}
    assert _summary(_stats((0,), fell_back=True), 0)["source"] == "computed"
    assert _summary(_stats((1,), prefix_cached=512), 600)["source"] == "prefix_cache"
    assert _summary(None, 512)["source"] == "prefix_cache"
    assert _summary(None, 480)["source"] == "prefix_cache"  # the tail computed by vLLM
    assert _summary(None, 0)["source"] == "computed"
