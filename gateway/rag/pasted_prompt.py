"""Prompts whose pasted passages become chunks (``blend.segment``, ``RAGBLEND_BLEND_SEGMENT``).

A chat or completion request without ``documents`` or ``retrieval`` is rendered as usual (the
chat template over every message, since stock RAG prompts put the passages in the system message,
or the completion prompt), then scanned for the passages the server knows
(``gateway.rag.passage_index``). The text is tokenized piece by piece: each found passage alone,
exactly as its chunk was tokenized when stored (so its cached KV is found), and the text between
passages as plain tokens, recomputed like any uncached token. The prompt is still a tokenization
of the very same text. A passage at the prompt's first token stays plain: a chunk there would
replace the attention sink every cached chunk was computed behind.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from engine.contract import BlendPlan
from gateway.http.errors import APIError
from gateway.openai.protocol import BlendOptions, SamplingFields
from gateway.rag.blending import blend_plan
from gateway.rag.chunked_prompt import ChunkContext, ChunkedPrompt, split_text
from gateway.rag.passage_index import FoundPassage
from gateway.settings import Settings


@dataclass(frozen=True)
class PastedPrompt:
    """A prompt with its found passages as chunks, and those passages."""

    prompt: ChunkedPrompt
    passages: tuple[FoundPassage, ...]

    def plan(
        self,
        options: BlendOptions | None,
        settings: Settings,
        blending: bool,
        neighbour_contexts: bool,
    ) -> BlendPlan:
        """The blend plan; a full prefill when nothing became a chunk. Library chunks' recipe
        applies when every chunk is one precomputed behind its neighbours, the tool catalog's
        when it is the only chunk."""
        if not self.prompt.spans:
            options = (options or BlendOptions()).model_copy(update={"mode": "full"})
        return blend_plan(
            self.prompt, options, settings, blending, self.context(neighbour_contexts)
        )

    def context(self, neighbour_contexts: bool) -> ChunkContext:
        """``library`` when every chunk is a library chunk precomputed behind its neighbours,
        ``tools`` when the tool catalog is the only chunk."""
        if not self.passages and self.prompt.tool_span is not None:
            return "tools"
        library = all(passage.origin == "library" for passage in self.passages)
        return "library" if self.passages and neighbour_contexts and library else "cold"


def segmenting(fields: SamplingFields, settings: Settings, one_text: bool) -> bool:
    """Whether to look for pasted passages: ``blend.segment``, else the server's setting, for a
    request without documents or retrieval whose prompt is one text (it then does not retrieve
    by default). Asked for explicitly where it cannot apply, it is a 400."""
    asked = None if fields.blend is None else fields.blend.segment
    plain = fields.documents is None and fields.retrieval is None
    if asked and not plain:
        message = "blend.segment finds passages in prompts without documents or retrieval."
        raise APIError(400, message, param="blend.segment")
    if asked and not one_text:
        message = "blend.segment needs the prompt as one string."
        raise APIError(400, message, param="blend.segment")
    return plain and one_text and (settings.blend_segment if asked is None else asked)


def split_prompt(
    text: str,
    passages: list[FoundPassage],
    tokenizer: Any,
    head: list[int],
    tool_block: tuple[int, int] | None = None,
) -> tuple[ChunkedPrompt, tuple[FoundPassage, ...]]:
    """``head``, then ``text`` tokenized piece by piece with each passage a chunk span (and the
    ``tool_block`` range, where passages overlapping it are dropped); the passages that became
    chunks."""
    if tool_block is not None:
        start, end = tool_block
        passages = [p for p in passages if p.end <= start or p.start >= end]
    pieces = sorted([(p.start, p.end) for p in passages] + ([tool_block] if tool_block else []))
    ids, spans = split_text(text, pieces, tokenizer, head)
    by_start = {passage.start: passage for passage in passages}
    placed, kept, tool_span = [], [], None
    for (start, _), span in zip(pieces, spans, strict=True):
        if span is None:
            continue
        if tool_block is not None and start == tool_block[0]:
            tool_span = len(kept)
        else:
            placed.append(by_start[start])
        kept.append(span)
    return ChunkedPrompt(ids, tuple(kept), tool_span), tuple(placed)
