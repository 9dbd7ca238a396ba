"""The requests and the summary of `load_tests.bench_peer` (ragblend against vLLM's own server).

Pure, kept apart so it is tested without servers (tests/unit/test_bench_peer.py): each phase's
requests, one body for vLLM and one for ragblend carrying the same passages (vLLM gets them
pasted into the user message, ragblend as ``documents``, ``retrieval`` or pasted with
``blend.segment``). ``load_tests/peer_summary.py`` turns the replies into figures.
"""

from __future__ import annotations

import hashlib
import random
from dataclasses import dataclass, field
from typing import Any

from gateway.rag.chunked_prompt import CHUNK_SEPARATOR
from load_tests.eval.prompts import MultiChunkItem
from load_tests.eval.qa_prompt import question_text
from load_tests.tool_catalogs import tool_catalog

CHAT = "/v1/chat/completions"
PHASES = (
    "first_sight",
    "reordered",
    "pasted",
    "library",
    "chat",
    "long_answers",
    "multi_turn",
    "tools",
    "completions",
)
NEEDS_SEEN = frozenset({"reordered", "pasted", "long_answers"})
"""Phases whose passages ragblend must have been sent before (as ``first_sight`` sends them)."""
TOOLS = 30
WARM_UP_BODY = {"messages": [{"role": "user", "content": "Say hello."}]}
FOLLOW_UPS = ("Say that again as one short sentence.", "Which passage says so?")
LONG_ANSWER = "Write a long story about the answer to this question, in many paragraphs: {}"
"""The ``long_answers`` phase: the sent passages re-ordered again (a blend of stored chunks) and
answers decoded to ``--max-tokens`` on both servers (`PeerRequest.full_length`), so decoding
after a blend is timed over as many tokens as after vLLM's prefill (the other phases' answers
end where each server's greedy answer ends: a few tokens' TPOT is mostly noise)."""


@dataclass(frozen=True)
class PeerRequest:
    """One request of a phase: the same prompt for both servers, in each one's own form."""

    phase: str
    key: str
    path: str
    vllm: dict[str, Any]
    ragblend: dict[str, Any]
    answers: list[str] = field(default_factory=list)
    """Gold answers; empty where the request has none (no F1)."""
    full_length: bool = False
    """Decoded to ``max_tokens`` on both servers (``min_tokens``), so both time as many tokens."""


def document_id(passage: str) -> str:
    """A library id of a passage's own: the same passage in two items is ingested once."""
    return "peer-" + hashlib.blake2b(passage.encode(), digest_size=8).hexdigest()


def reordered(count: int, seed: str) -> list[int]:
    """A seeded permutation of ``range(count)`` whose first place changes (for count > 1), so
    that no prefix cache holds a prompt of the passages in their first order beyond its head."""
    order = list(range(count))
    random.Random(seed).shuffle(order)
    if count > 1 and order[0] == 0:
        order = order[1:] + order[:1]
    return order


def sent_passages(item: MultiChunkItem) -> list[str]:
    """The item's passages as the sent-document phases send them, each tagged with its question:
    two questions sharing a distractor (the CI sample has 24 passages in all) would otherwise
    make a "first sight" a partial hit. The same tags every phase, so re-orders find them."""
    return [f"[{item.id}, passage {n + 1}] {text}" for n, text in enumerate(item.documents)]


def _in_order(passages: list[str], order: list[int]) -> list[str]:
    return [passages[index] for index in order]


def pasted(passages: list[str], question: str) -> str:
    """A user message with the passages pasted as ragblend lays out sent ``documents``."""
    return "".join(passage + CHUNK_SEPARATOR for passage in passages) + question_text(question)


def _user(content: str) -> list[dict[str, str]]:
    return [{"role": "user", "content": content}]


def _qa(
    phase: str, item: MultiChunkItem, passages: list[str], ragblend: dict[str, Any]
) -> PeerRequest:
    vllm = {"messages": _user(pasted(passages, item.question))}
    return PeerRequest(phase, item.id, CHAT, vllm, ragblend, list(item.answers))


def _sent(phase: str, item: MultiChunkItem, order: list[int]) -> PeerRequest:
    passages = _in_order(sent_passages(item), order)
    body = {"messages": _user(question_text(item.question)), "documents": passages}
    return _qa(phase, item, passages, body)


def _multi_turn(item: MultiChunkItem, turns: int) -> list[PeerRequest]:
    """A conversation of ``turns`` requests, each the one before plus a fixed assistant reply
    (so both servers see the same prompts) and a follow-up; only the first turn has gold."""
    gold = item.documents[item.gold_index]
    messages = [
        {"role": "system", "content": f"Conversation {item.id}."},
        *_user(pasted([gold], item.question)),
    ]
    requests = []
    for turn in range(turns):
        body = {"messages": list(messages)}
        answers = list(item.answers) if turn == 0 else []
        requests.append(PeerRequest("multi_turn", f"{item.id}/{turn}", CHAT, body, body, answers))
        follow_up = FOLLOW_UPS[turn % len(FOLLOW_UPS)]
        messages += [{"role": "assistant", "content": item.answers[0]}, *_user(follow_up)]
    return requests


def phase_requests(phase: str, items: list[MultiChunkItem], turns: int = 3) -> list[PeerRequest]:
    """Every request of ``phase`` over ``items``, in sending order."""
    requests: list[PeerRequest] = []
    for number, item in enumerate(items):
        count = len(item.documents)
        if phase == "first_sight":
            requests.append(_sent(phase, item, list(range(count))))
        elif phase == "reordered":
            requests.append(_sent(phase, item, reordered(count, f"reordered:{item.id}")))
        elif phase == "pasted":
            passages = _in_order(sent_passages(item), reordered(count, f"pasted:{item.id}"))
            body = {"messages": _user(pasted(passages, item.question)), "blend": {"segment": True}}
            requests.append(_qa(phase, item, passages, body))
        elif phase == "library":
            order = reordered(count, f"library:{item.id}")
            ids = sorted({document_id(passage) for passage in item.documents})
            retrieval = {"top_k": len(ids), "document_ids": ids}
            body = {"messages": _user(question_text(item.question)), "retrieval": retrieval}
            requests.append(_qa(phase, item, _in_order(item.documents, order), body))
        elif phase == "chat":
            body = {"messages": _user(item.question)}
            requests.append(PeerRequest(phase, item.id, CHAT, body, body))
        elif phase == "long_answers":
            passages = _in_order(sent_passages(item), reordered(count, f"long:{item.id}"))
            long_story = LONG_ANSWER.format(item.question)
            vllm = {"messages": _user(pasted(passages, long_story))}
            body = {"messages": _user(question_text(long_story)), "documents": passages}
            requests.append(PeerRequest(phase, item.id, CHAT, vllm, body, full_length=True))
        elif phase == "multi_turn":
            requests.extend(_multi_turn(item, turns))
        elif phase == "tools":
            system = {"role": "system", "content": f"Session {item.id}. You help with a workspace."}
            body = {
                "messages": [system, *_user(f"{item.question} Then find my latest invoice.")],
                "tools": tool_catalog(TOOLS, catalog=number),
            }
            requests.append(PeerRequest(phase, item.id, CHAT, body, body))
        elif phase == "completions":
            text = "".join(passage + CHUNK_SEPARATOR for passage in item.documents)
            body = {"prompt": f"Record {item.id}.\n\n{text}Question: {item.question}\nAnswer:"}
            requests.append(
                PeerRequest(phase, item.id, "/v1/completions", body, body, list(item.answers))
            )
        else:
            raise ValueError(f"unknown phase {phase!r}; one of {', '.join(PHASES)}")
    return requests


def blocks(requests: list[PeerRequest], size: int) -> list[list[PeerRequest]]:
    """Consecutive blocks of ``size`` requests; a conversation's turns stay in order."""
    return [requests[start : start + size] for start in range(0, len(requests), size)]


WARM_UP = PeerRequest("warm_up", "warm_up", CHAT, WARM_UP_BODY, WARM_UP_BODY)
"""Sent once to each server before any phase: first-request costs are no phase's."""
