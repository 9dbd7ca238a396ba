"""Which chunks keep arriving together, and which context each chunk's stored KV was computed in.

Pure, bounded data structures behind learnt contexts (`gateway.rag.learnt_contexts`):

- ``Arrangement``: a request's chunks as content digests, in prompt order, with the context each
  one stands in (a digest of every chunk before it, separators included).
- ``LearningQueue``: counts sightings of arrangements (LRU, at most ``capacity``); once one has
  been seen ``after`` times it becomes a job in a queue of at most ``queue_size`` (a job that
  does not fit is dropped and its count starts again).
- ``ContextRecords``: per chunk, the context its stored KV was computed in and its store key, so
  that a request whose every chunk stands where it was computed takes the in-context recipe,
  and an evicted entry (reported by its key) stops counting.

Arrangements are keyed in prompt order, not as sets: a chunk's KV is computed behind the chunks
before it, so the same chunks in another order need other KV, and counting the orders together
would queue work that the order actually sent cannot use. RAG clients send a question's passages
in their retriever's (stable) order, so repeats arrive in the same order.
"""

from __future__ import annotations

import hashlib
from array import array
from collections import OrderedDict, deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

Digest = bytes
Observed = Literal["counted", "queued", "dropped", "pending"]


def digest(token_ids: Sequence[int], salt: str = "") -> Digest:
    """A content digest of token ids under a chunk-KV salt (128 bits: collisions are not a
    concern at any capacity)."""
    hashed = hashlib.blake2b(salt.encode(), digest_size=16)
    hashed.update(array("q", token_ids).tobytes())
    return hashed.digest()


@dataclass(frozen=True)
class Arrangement:
    """A request's chunks: their token ids and digests in prompt order, and the digest of the
    context each stands in."""

    chunks: tuple[tuple[int, ...], ...]
    separator: tuple[int, ...]
    digests: tuple[Digest, ...]
    contexts: tuple[Digest, ...]
    salt: str = ""
    """The chunk-KV salt of the requests' project (`Tenant.kv_salt`): one project's learnt
    contexts are never another's."""
    head: tuple[int, ...] = ()
    """The prompt's tokens before the first chunk (chat template, system prompt, earlier turns)
    in the sighting that queued it, what learning computes the chunks behind. Not part of the
    identity: a chat that resends its documents every turn has a longer head each time, and
    KV learnt behind an earlier turn's head still holds the chunks' attention to each other
    (how close it then stays to full prefill is not measured)."""

    @classmethod
    def of(
        cls,
        chunks: Sequence[Sequence[int]],
        separator: Sequence[int],
        salt: str = "",
        head: Sequence[int] = (),
    ) -> Arrangement:
        ids = tuple(tuple(chunk) for chunk in chunks)
        digests = tuple(digest(chunk, salt) for chunk in ids)
        contexts, running = [], hashlib.blake2b(bytes(array("q", separator)), digest_size=16)
        for chunk_digest in digests:
            contexts.append(running.digest())
            running.update(chunk_digest)
        return cls(ids, tuple(separator), digests, tuple(contexts), salt, tuple(head))

    @property
    def head_digest(self) -> Digest:
        return digest(self.head, self.salt)

    @property
    def key(self) -> Digest:
        """The arrangement's identity: its chunks in order (and their separator)."""
        return self.contexts[-1] + self.digests[-1] if self.digests else b""


class LearningQueue:
    """Sightings of arrangements (LRU-bounded) and the bounded queue of those to learn."""

    def __init__(self, after: int, capacity: int, queue_size: int) -> None:
        if after < 1 or capacity < 1 or queue_size < 1:
            raise ValueError("after, capacity and queue_size must be at least 1")
        self.after = after
        self.capacity = capacity
        self.queue_size = queue_size
        self._counts: OrderedDict[Digest, int] = OrderedDict()
        self._jobs: deque[Arrangement] = deque()
        self._pending: set[Digest] = set()
        """Keys queued or being learnt: sightings of them meanwhile are not counted."""

    def observe(self, arrangement: Arrangement) -> Observed:
        """Count one sighting; the ``after``-th makes it a job, unless the queue is full."""
        key = arrangement.key
        if key in self._pending:
            return "pending"
        seen = self._counts.pop(key, 0) + 1
        if seen < self.after:
            self._counts[key] = seen
            while len(self._counts) > self.capacity:
                self._counts.popitem(last=False)
            return "counted"
        if len(self._jobs) >= self.queue_size:
            return "dropped"
        self._jobs.append(arrangement)
        self._pending.add(key)
        return "queued"

    def take(self) -> Arrangement | None:
        """The oldest job, or None; call ``finish`` with it once learnt (or failed)."""
        return self._jobs.popleft() if self._jobs else None

    def finish(self, arrangement: Arrangement) -> None:
        self._pending.discard(arrangement.key)

    @property
    def tracked(self) -> int:
        return len(self._counts)

    @property
    def queued(self) -> int:
        return len(self._jobs)


class ContextRecords:
    """Per chunk digest: the context digest its stored KV was computed in, the digest of the
    head it was computed behind, and the store key it lies under (LRU-bounded; a forgotten
    chunk only loses its in-context recipe)."""

    def __init__(self, capacity: int) -> None:
        if capacity < 1:
            raise ValueError("capacity must be at least 1")
        self.capacity = capacity
        self._contexts: OrderedDict[Digest, tuple[Digest, str, Digest]] = OrderedDict()
        self._by_key: dict[str, Digest] = {}

    def record(self, chunk: Digest, context: Digest, key: str, head: Digest = b"") -> None:
        self._drop(chunk)
        self._contexts[chunk] = (context, key, head)
        self._by_key[key] = chunk
        while len(self._contexts) > self.capacity:
            self._drop(next(iter(self._contexts)))

    def stands_in(self, chunk: Digest, context: Digest) -> bool:
        """Whether ``chunk``'s stored KV was computed in ``context`` (and is still stored)."""
        entry = self._contexts.get(chunk)
        if entry is None or entry[0] != context:
            return False
        self._contexts.move_to_end(chunk)
        return True

    def all_stand_in(self, arrangement: Arrangement) -> bool:
        pairs = zip(arrangement.digests, arrangement.contexts, strict=True)
        return bool(arrangement.digests) and all(self.stands_in(*pair) for pair in pairs)

    def learnt_behind(self, arrangement: Arrangement) -> bool:
        """Whether every chunk of ``arrangement`` (all standing in their contexts) was learnt
        behind its very head: then the stored KV is what a prefill of the prompt computes."""
        head = arrangement.head_digest
        return all(self._contexts[chunk][2] == head for chunk in arrangement.digests)

    def forget_keys(self, keys: Iterable[str]) -> None:
        """Entries that left the chunk store: a later store of them is not the learnt KV."""
        for key in keys:
            chunk = self._by_key.get(key)
            if chunk is not None:
                self._drop(chunk)

    def _drop(self, chunk: Digest) -> None:
        entry = self._contexts.pop(chunk, None)
        if entry is not None:
            self._by_key.pop(entry[1], None)

    def __contains__(self, chunk: object) -> bool:
        return chunk in self._contexts

    def __len__(self) -> int:
        return len(self._contexts)
