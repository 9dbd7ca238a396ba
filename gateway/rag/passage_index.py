"""The passages the server can find pasted into a prompt (``blend.segment``): library chunks and
documents sent earlier with ``documents``.

Both are held as anchors and content keys only (``gateway.rag.passage_finder``), never as text:
about 600 bytes a passage. Sent documents are remembered as they arrive, at most
``RAGBLEND_PASTED_PASSAGES_MAX`` of them, the least recently sent forgotten first. Library chunks
follow the library's vector index, which every replica keeps in step with the shared store: a
segmenting request first files the chunks the index gained since the last one (reading their
text from the library once) and drops those it lost.
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from collections.abc import Callable, Collection, Hashable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from gateway.rag.passage_finder import (
    Occurrence,
    PassageKey,
    anchor_of,
    non_overlapping,
    occurrences,
    passage_key,
)
from retriever import EVERY_PROJECT, LibraryUnavailable

if TYPE_CHECKING:
    from retriever import Library

log = logging.getLogger(__name__)
SYNC_BATCH = 512
"""Library chunks read per query while filing new ones."""
Origin = Literal["library", "documents"]


class PassageIndex:
    """Passages under owner ids, filed by anchor; with ``max_passages`` the oldest owner goes
    when one more arrives. Thread-safe: requests search it while others add to it."""

    def __init__(self, max_passages: int | None = None) -> None:
        self.max_passages = max_passages
        self._owners: OrderedDict[Hashable, tuple[int, PassageKey]] = OrderedDict()
        self._anchors: dict[int, list[PassageKey]] = {}
        """Anchor -> the key of each owner's passage filed under it."""
        self._holders: dict[PassageKey, list[Hashable]] = {}
        """Key -> the owners whose passage it is."""
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._owners)

    def add(self, owner: Hashable, text: str) -> bool:
        """File ``text`` under ``owner`` (an owner already filed counts as the newest); False
        when it is too short to be found, or nothing may be kept."""
        anchor = anchor_of(text)
        if anchor is None or self.max_passages == 0:
            return False
        with self._lock:
            if owner in self._owners:
                self._owners.move_to_end(owner)
                return True
            key = passage_key(text)
            self._owners[owner] = (anchor, key)
            self._anchors.setdefault(anchor, []).append(key)
            self._holders.setdefault(key, []).append(owner)
            while self.max_passages is not None and len(self._owners) > self.max_passages:
                self._forget(next(iter(self._owners)))
        return True

    def discard(self, owners: Iterable[Hashable]) -> None:
        with self._lock:
            for owner in owners:
                if owner in self._owners:
                    self._forget(owner)

    def owners(self) -> set[Hashable]:
        with self._lock:
            return set(self._owners)

    def find(
        self, text: str, visible: Callable[[Hashable], bool] | None = None
    ) -> list[Occurrence]:
        """Every occurrence in ``text`` of a passage filed here; given ``visible``, only of
        passages with an owner it accepts."""
        with self._lock:
            found = occurrences(text, self._anchors)
            if visible is None:
                return found
            return [hit for hit in found if any(map(visible, self._holders[hit.key]))]

    def _forget(self, owner: Hashable) -> None:
        anchor, key = self._owners.pop(owner)
        keys = self._anchors[anchor]
        keys.remove(key)
        if not keys:
            del self._anchors[anchor]
        holders = self._holders[key]
        holders.remove(owner)
        if not holders:
            del self._holders[key]


@dataclass(frozen=True)
class FoundPassage:
    """A known passage found at ``text[start:end]``; ``origin`` says where it is known from
    (``library`` when both know it)."""

    start: int
    end: int
    origin: Origin


class KnownPassages:
    """The library's chunks and the documents sent earlier, found together."""

    def __init__(self, max_sent: int) -> None:
        self.sent = PassageIndex(max_sent)
        self.library = PassageIndex()
        self._library_seen: set[int] = set()
        """Chunk ids already read, filed or too short to be."""
        self._sync_lock = threading.Lock()

    def remember(self, documents: Iterable[str], salt: str) -> None:
        """Documents a request sent: their chunk KV is stored under their text's token ids and
        the sender's chunk-KV ``salt`` (`Tenant.kv_salt`)."""
        for text in documents:
            self.sent.add((salt, passage_key(text)), text)

    def sync_library(self, library: Library) -> None:
        """File the chunks the library's index gained since the last call, drop those it lost;
        with the library's database unreachable, keep what is filed and say so."""
        with self._sync_lock:
            present = library.index.ids()
            gone = self._library_seen - present
            self.library.discard(gone)
            self._library_seen -= gone
            new = sorted(present - self._library_seen)
            try:
                for first in range(0, len(new), SYNC_BATCH):
                    batch = new[first : first + SYNC_BATCH]
                    for row in library.store.chunks_for(batch, project=EVERY_PROJECT):
                        self.library.add(row.id, row.text)
                    self._library_seen.update(batch)
            except LibraryUnavailable as exc:
                log.warning("pasted passages: library chunks not read this time (%s)", exc)

    def find(
        self, text: str, salt: str, library_chunks: Collection[int] | None
    ) -> list[FoundPassage]:
        """The known passages that become chunks of ``text``, left to right, not overlapping:
        those sent under the caller's chunk-KV ``salt``, and the library chunks among
        ``library_chunks`` (None: all of them). Another project's passages are never found, so
        neither the count nor the timing of a request tells that they exist."""
        library = self.library.find(
            text, None if library_chunks is None else library_chunks.__contains__
        )
        in_library = {(hit.start, hit.end) for hit in library}
        sent = self.sent.find(text, lambda owner: owner[0] == salt)
        found = non_overlapping([*library, *sent])
        return [
            FoundPassage(
                hit.start, hit.end, "library" if (hit.start, hit.end) in in_library else "documents"
            )
            for hit in found
        ]
