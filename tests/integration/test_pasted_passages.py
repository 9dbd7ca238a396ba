"""Passages pasted into a plain prompt, as LangChain's stuff-documents chain sends them, on the real
server (SmolLM2): with `blend.segment` every passage the server has cached, sent earlier as
`documents` or ingested into the library, is found and its chunk KV reused; without it nothing
is."""

from __future__ import annotations

import time
from typing import Any

import httpx
import pytest
from langchain_core.messages import convert_to_openai_messages
from langchain_core.prompts import ChatPromptTemplate

from tests.integration.conftest import Server

pytestmark = pytest.mark.integration

# LangChain's stock "stuff" QA prompt (langchain.chains.question_answering.stuff_prompt).
STUFF_SYSTEM = (
    "Use the following pieces of context to answer the user's question. \n"
    "If you don't know the answer, just say that you don't know, don't try to make up an "
    "answer.\n----------------\n{context}"
)
STUFF_PROMPT = ChatPromptTemplate.from_messages([("system", STUFF_SYSTEM), ("human", "{question}")])
FILLER = "Its people farm the valleys, trade by river and hold a market every spring."
WAIT_SECONDS = 300


def _passage(place: str, city: str) -> str:
    return f"The capital of {place} is {city}. {FILLER} {place} has a long coastline."


def _stuffed(passages: list[str], question: str) -> list[dict[str, Any]]:
    """The chain's messages, as LangChain's OpenAI client sends them: passages joined by blank
    lines in the system message, the question as the user's."""
    context = "\n\n".join(passages)
    messages = STUFF_PROMPT.format_messages(context=context, question=question)
    return convert_to_openai_messages(messages)


def _chat(client: httpx.Client, server: Server, **fields: Any) -> dict[str, Any]:
    body = {"model": server.model, "max_tokens": 16, "temperature": 0, **fields}
    reply = client.post("/v1/chat/completions", json=body)
    assert reply.status_code == 200, reply.text
    return reply.json()


def test_documents_sent_earlier_are_reused_when_pasted(server: Server) -> None:
    passages = [
        _passage("Lorvania", "Quillmar"),
        _passage("Estoria", "Brennhaven"),
        _passage("Valdoria", "Marrowick"),
    ]
    question = "What is the capital of Valdoria?"  # the passage nearest the question
    with server.client() as client:
        plain = _chat(client, server, messages=_stuffed(passages, question))
        sent = [{"role": "user", "content": question}]
        first = _chat(client, server, messages=sent, documents=passages)
        pasted = _chat(
            client, server, messages=_stuffed(passages, question), blend={"segment": True}
        )
        again = _chat(client, server, messages=_stuffed(passages, question))
    assert "blend" not in plain and "blend" not in again  # without segment: no chunk reuse
    assert first["blend"]["chunks_missed"] == len(passages)  # computed and stored
    assert pasted["blend"]["pasted_passages"] == len(passages)
    assert pasted["blend"]["chunks_hit"] == len(passages)
    assert pasted["blend"]["chunks_missed"] == 0
    assert pasted["usage"]["prompt_tokens_details"]["cached_tokens"] > 0
    # Sane: it answers the question as full prefill does ("The capital of Valdoria is ...").
    # SmolLM2 at the sent documents' recipe (ratio 0.3) has been seen to garble the name itself
    # ("Maradoria" for full's "Marrowick"); the library test below gets the names right.
    answer = pasted["choices"][0]["message"]["content"]
    full = plain["choices"][0]["message"]["content"]
    assert answer.startswith("The capital of Valdoria is ") and full.startswith(answer[:27])


def test_library_chunks_are_reused_when_pasted(server: Server) -> None:
    documents = {
        "pasted-orvania": _passage("Orvania", "Tessaport"),
        "pasted-kelmark": _passage("Kelmark", "Duneholt"),
    }
    with server.client() as client:
        body = {"documents": [{"id": key, "text": text} for key, text in documents.items()]}
        reply = client.post("/v1/documents", json=body)
        assert reply.status_code == 200, reply.text
        assert [doc["num_chunks"] for doc in reply.json()["data"]] == [1, 1]
        deadline = time.monotonic() + WAIT_SECONDS
        while any(
            client.get(f"/v1/documents/{key}").json()["status"] != "cached" for key in documents
        ):
            assert time.monotonic() < deadline, "the documents were never cached"
            time.sleep(0.5)
        context = "\n\n".join(documents.values())
        question = "Question: What is the capital of Orvania?\nAnswer: The capital of Orvania is"
        prompt = f"Context:\n{context}\n\n{question}"
        completion = {"model": server.model, "prompt": prompt, "max_tokens": 8, "temperature": 0}
        pasted = client.post("/v1/completions", json={**completion, "blend": {"segment": True}})
        question = "What is the capital of Kelmark?"
        chat = _chat(
            client,
            server,
            messages=_stuffed(list(documents.values()), question),
            blend={"segment": True},
        )
    assert pasted.status_code == 200, pasted.text
    blend = pasted.json()["blend"]
    assert (blend["pasted_passages"], blend["chunks_hit"], blend["chunks_missed"]) == (2, 2, 0)
    assert "Tessaport" in pasted.json()["choices"][0]["text"]
    assert (chat["blend"]["pasted_passages"], chat["blend"]["chunks_hit"]) == (2, 2)
    assert "Duneholt" in chat["choices"][0]["message"]["content"]


def test_a_prompt_without_known_passages_reports_none_found(server: Server) -> None:
    with server.client() as client:
        reply = _chat(
            client,
            server,
            messages=_stuffed([_passage("Nowhereland", "Nulltown")], "Capital of Nowhereland?"),
            blend={"segment": True},
        )
    assert reply["blend"]["pasted_passages"] == 0
    assert reply["blend"]["mode"] == "full" and reply["blend"]["chunks_hit"] == 0
