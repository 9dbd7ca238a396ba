"""Prompts whose pasted passages become chunks: the same text, each passage tokenized as its
chunk was stored, and when ``blend.segment`` applies at all."""

from __future__ import annotations

import pytest
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import PreTrainedTokenizerFast

from gateway.http.errors import APIError
from gateway.openai.protocol import BlendOptions, ChatCompletionRequest, CompletionRequest
from gateway.rag.chunked_prompt import document_chunks
from gateway.rag.passage_index import FoundPassage, KnownPassages
from gateway.rag.pasted_prompt import PastedPrompt, segmenting, split_prompt
from gateway.settings import Settings
from tests.unit.gateway_fakes import client, ready_app

DOCUMENTS = [
    "The Harbour Museum opened in a former customs house.\nIt holds ship models and charts.",
    "A river delta forms where a river meets slower water and drops the sediment it carries.",
]
TEXT = (
    "Use the following pieces of context to answer the question.\n----------------\n"
    f"{DOCUMENTS[0]}\n\n{DOCUMENTS[1]}\n\nQuestion: where did the museum open?"
)


@pytest.fixture(scope="module")
def tokenizer() -> PreTrainedTokenizerFast:
    """A byte-level BPE trained here on the test's own text: its merges cross the passages'
    edges (newlines, spaces), so tokenizing the whole text differs from piece by piece."""
    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    bpe.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=400, initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
    )
    bpe.train_from_iterator([TEXT] * 20, trainer)
    return PreTrainedTokenizerFast(tokenizer_object=bpe)


def found_in(text: str, documents: list[str]) -> list[FoundPassage]:
    known = KnownPassages(max_sent=100)
    known.remember(documents, "")
    return known.find(text, "", None)


def test_each_passage_is_tokenized_as_its_sent_document_was(tokenizer) -> None:
    found = found_in(TEXT, DOCUMENTS)
    assert [TEXT[p.start : p.end] for p in found] == DOCUMENTS
    prompt, placed = split_prompt(TEXT, found, tokenizer, [])
    stored = document_chunks(DOCUMENTS, tokenizer).token_ids
    assert [prompt.token_ids[span.start : span.end] for span in prompt.spans] == stored
    assert placed == tuple(found)
    assert tokenizer.decode(prompt.token_ids) == TEXT
    assert prompt.token_ids != tokenizer.encode(TEXT)  # another tokenization of the same text


def test_the_text_between_passages_stays_as_plain_tokens(tokenizer) -> None:
    prompt, _ = split_prompt(TEXT, found_in(TEXT, DOCUMENTS), tokenizer, [5])
    first, second = prompt.spans
    assert prompt.token_ids[0] == 5
    between = tokenizer.decode(prompt.token_ids[first.end : second.start])
    assert between == "\n\n"
    assert tokenizer.decode(prompt.token_ids[second.end :]).startswith("\n\nQuestion:")


def test_a_passage_at_the_first_token_stays_text(tokenizer) -> None:
    text = DOCUMENTS[0] + " and " + DOCUMENTS[1]
    prompt, placed = split_prompt(text, found_in(text, DOCUMENTS), tokenizer, [])
    assert [p.start for p in placed] == [len(DOCUMENTS[0]) + 5]
    assert len(prompt.spans) == 1 and prompt.spans[0].start > 0
    assert tokenizer.decode(prompt.token_ids) == text
    with_bos, placed = split_prompt(text, found_in(text, DOCUMENTS), tokenizer, [0])
    assert len(placed) == 2 and with_bos.spans[0].start == 1


def test_a_prompt_without_known_passages_is_a_full_prefill(tokenizer) -> None:
    prompt, placed = split_prompt(TEXT, [], tokenizer, [])
    settings = Settings(model="m")
    plan = PastedPrompt(prompt, placed).plan(BlendOptions(mode="blend"), settings, True, True)
    assert plan.recipe.mode == "full" and plan.spans == ()
    assert prompt.token_ids == tokenizer.encode(TEXT)


def test_library_passages_alone_take_the_library_recipe(tokenizer) -> None:
    settings = Settings(model="m", blend_in_context_ratio=0.15, blend_recompute_ratio=0.3)
    found = found_in(TEXT, DOCUMENTS)
    prompt, _ = split_prompt(TEXT, found, tokenizer, [])
    library = tuple(FoundPassage(p.start, p.end, "library") for p in found)
    mixed = (library[0], found[1])

    def ratio(passages: tuple[FoundPassage, ...], neighbour_contexts: bool) -> float:
        plan = PastedPrompt(prompt, passages).plan(None, settings, True, neighbour_contexts)
        return plan.recipe.recompute_ratio

    assert (ratio(library, True), ratio(mixed, True), ratio(library, False)) == (0.15, 0.3, 0.3)


def chat(**fields: object) -> ChatCompletionRequest:
    return ChatCompletionRequest(model="m", messages=[{"role": "user", "content": "q"}], **fields)


@pytest.mark.parametrize(
    ("server", "asked", "expected"),
    [(False, None, False), (True, None, True), (False, True, True), (True, False, False)],
)
def test_the_request_option_goes_over_the_server_setting(
    server: bool, asked: bool | None, expected: bool
) -> None:
    settings = Settings(model="m", blend_segment=server)
    body = chat(blend={"segment": asked}) if asked is not None else chat()
    assert segmenting(body, settings, one_text=True) is expected


def test_the_server_setting_leaves_documents_and_token_prompts_alone() -> None:
    settings = Settings(model="m", blend_segment=True)
    assert not segmenting(chat(documents=["d"]), settings, one_text=True)
    assert not segmenting(CompletionRequest(model="m", prompt=[1, 2]), settings, one_text=False)


def test_asking_where_it_cannot_apply_is_a_400_naming_the_field() -> None:
    settings = Settings(model="m")
    with pytest.raises(APIError) as error:
        segmenting(chat(documents=["d"], blend={"segment": True}), settings, one_text=True)
    assert error.value.param == "blend.segment"
    tokens = CompletionRequest(model="m", prompt=[1, 2], blend={"segment": True})
    with pytest.raises(APIError) as error:
        segmenting(tokens, settings, one_text=False)
    assert error.value.param == "blend.segment"


def test_the_routes_refuse_segment_with_retrieval() -> None:
    body = {
        "model": "served",
        "messages": [{"role": "user", "content": "q"}],
        "retrieval": {"top_k": 2},
        "blend": {"segment": True},
    }
    response = client(ready_app()).post("/v1/chat/completions", json=body)
    assert response.status_code == 400
    assert response.json()["error"]["param"] == "blend.segment"
    completion = {"model": "served", "prompt": [[1, 2], [3]], "blend": {"segment": True}}
    response = client(ready_app()).post("/v1/completions", json=completion)
    assert response.status_code == 400
    assert response.json()["error"]["param"] == "blend.segment"
