"""The served model as the reranker: candidates scored by how likely the model finds the question
after each passage (query likelihood, as UPR: Sachan et al., "Improving Passage Retrieval with
Zero-Shot Question Generation", EMNLP 2022).

No PyPI package ships a cross-encoder's weights that load offline (FlashRank, rerankers and
their kin download theirs at run time; see docs/benchmarks.md), so the reranker is the one model
ragblend already has: the served model's own weights, read with Hugging Face transformers in the
gateway's process. The prompt puts the passage first, so its KV does not depend on the question:
it is computed once per passage and kept (`retriever.search.passage_kv`); a query then computes
only its own tokens over each candidate's cached KV, all candidates in one batched forward pass.
A score is the geometric mean of the question tokens' probabilities, in [0, 1].
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from retriever.search.grouped_attention import use_grouped_sdpa
from retriever.search.passage_kv import PassageKV, PassageKVCache, left_padded_cache

PROMPT_HEAD = "Passage: "
PROMPT_TAIL = "\nPlease write a question based on this passage.\nQuestion:"
MAX_PASSAGE_TOKENS = 384
"""Longest passage read, in the model's tokens (the default chunk); longer ones are cut."""
MAX_QUESTION_TOKENS = 64
"""Longest question scored; a longer one is scored on its first tokens."""


class QueryLikelihoodReranker:
    """A `retriever.search.ranking.Reranker` over a causal LM. Calls run one at a time, in
    arrival order, on the reranker's own thread with ``threads`` torch threads (torch's thread
    count is the calling thread's own under OpenMP, so the embedder keeps its count): on the few
    cores it shares with the engine, two batches at once, or more threads than the engine
    leaves idle, only slow each other."""

    def __init__(self, model: Any, tokenizer: Any, cache_bytes: int, threads: int = 1) -> None:
        """`model` becomes the reranker's own: it is switched to `grouped_sdpa` attention."""
        use_grouped_sdpa(model)
        self.model = model
        self.tokenizer = tokenizer
        self._head = self._ids(PROMPT_HEAD)
        self._tail = self._ids(PROMPT_TAIL)
        self._cache = PassageKVCache(cache_bytes)
        self._thread = ThreadPoolExecutor(
            1, "reranker", initializer=torch.set_num_threads, initargs=(threads,)
        )

    @classmethod
    def load(
        cls, model_dir: Path, cache_bytes: int, dtype: str = "float32", threads: int = 1
    ) -> QueryLikelihoodReranker:
        """The model in `model_dir` (the served model's folder, already on disk), on the CPU in
        `dtype`: bfloat16 where the CPU multiplies it natively (2.5x float32's speed on the
        project's EPYC, the same order), else float32 (`engine.platform.resolve_dtype`)."""
        from transformers import AutoModelForCausalLM, AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(model_dir)
        model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=getattr(torch, dtype))
        return cls(model.eval(), tokenizer, cache_bytes, threads)

    def scores(self, query: str, texts: Sequence[str]) -> list[float]:
        """How likely the model finds `query` after each text: exp of the mean log-probability
        of the question's tokens, in [0, 1]."""
        if not texts:
            return []
        question = self._ids(" " + query.strip())[:MAX_QUESTION_TOKENS]
        if not question:
            raise ValueError("query is empty")
        return self._thread.submit(self._scored, question, texts).result()

    def _scored(self, question: list[int], texts: Sequence[str]) -> list[float]:
        with torch.inference_mode():
            logprobs = self._question_logprobs(self._passages(texts), question)
        return [math.exp(row.mean().item()) for row in logprobs]

    def _ids(self, text: str) -> list[int]:
        return list(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    def _passages(self, texts: Sequence[str]) -> list[PassageKV]:
        """Each text's KV: from the cache, else computed (all the missing ones in one batch)."""
        found: dict[str, PassageKV] = {}
        missing: dict[str, list[int]] = {}
        for text in dict.fromkeys(texts):
            entry = self._cache.get(text)
            if entry is not None:
                found[text] = entry
            else:
                missing[text] = self._head + self._ids(text)[:MAX_PASSAGE_TOKENS] + self._tail
        if missing:
            for text, entry in zip(missing, self._prefill(list(missing.values())), strict=True):
                self._cache.put(text, entry)
                found[text] = entry
        return [found[text] for text in texts]

    def _prefill(self, prompts: list[list[int]]) -> list[PassageKV]:
        """The KV of each prompt, computed in one left-padded batch."""
        longest = max(len(prompt) for prompt in prompts)
        ids = torch.zeros(len(prompts), longest, dtype=torch.long)
        mask = torch.zeros(len(prompts), longest, dtype=torch.long)
        for row, prompt in enumerate(prompts):
            ids[row, longest - len(prompt) :] = torch.tensor(prompt)
            mask[row, longest - len(prompt) :] = 1
        positions = (mask.cumsum(-1) - 1).clamp(min=0)
        out = self.model(
            ids, attention_mask=mask, position_ids=positions, use_cache=True, logits_to_keep=1
        )
        next_logprobs = out.logits[:, -1].float().log_softmax(-1)
        layers = out.past_key_values.layers
        return [
            PassageKV(
                tuple(layer.keys[row, :, longest - len(prompt) :].clone() for layer in layers),
                tuple(layer.values[row, :, longest - len(prompt) :].clone() for layer in layers),
                next_logprobs[row].clone(),
            )
            for row, prompt in enumerate(prompts)
        ]

    def _question_logprobs(self, entries: list[PassageKV], question: list[int]) -> Tensor:
        """[candidates, question tokens]: each question token's log-probability after the
        passage and the question's earlier tokens; only the question is computed."""
        target = torch.tensor(question)
        first = torch.stack([entry.next_logprobs[target[0]] for entry in entries])[:, None]
        if len(question) == 1:
            return first
        fed = target[:-1].expand(len(entries), -1)  # the last token predicts nothing scored
        cache, past_mask = left_padded_cache(entries, room=fed.shape[1])
        mask = torch.cat([past_mask, torch.ones_like(fed)], dim=1)
        positions = torch.stack(
            [torch.arange(entry.tokens, entry.tokens + fed.shape[1]) for entry in entries]
        )
        logits = self.model(
            fed, past_key_values=cache, attention_mask=mask, position_ids=positions
        ).logits
        rest = logits.float().log_softmax(-1).gather(-1, target[1:].expand_as(fed)[..., None])
        return torch.cat([first, rest[..., 0]], dim=1)
