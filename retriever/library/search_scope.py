"""Which of a project's chunks a library search may return, worked out before it ranks.

A search names documents, a metadata condition, both or neither; the project bounds all of
them. Resolving that once, before either ranking runs, lets the dense search filter inside FAISS
(an id selector) and the keyword search inside the database, so another project's chunks neither
show nor crowd out this one's. While the library holds only this project's documents and the
search names none, nothing is filtered (a filter costs a check per chunk found).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from retriever.library.document_ids import stored_id
from retriever.library.documents import MetadataCondition
from retriever.library.interfaces import LibraryStore


@dataclass(frozen=True)
class SearchScope:
    """The bounds of one search in stored ids."""

    document_ids: list[str] | None
    """The documents searched (stored ids); None: all of the project's."""
    allowed: set[int] | None
    """The chunk ids the dense search may return; None: any in the index."""
    shared: bool
    """Whether the library holds other projects' documents too (the keyword search filters)."""

    @property
    def empty(self) -> bool:
        """Nothing can match: the named documents hold no chunks of this project."""
        return self.allowed is not None and not self.allowed


def search_scope(
    store: LibraryStore,
    project: str,
    document_ids: Sequence[str] | None,
    where: MetadataCondition | None,
) -> SearchScope:
    """The scope of a search of `project` within `document_ids` (client ids) whose metadata
    passes `where`; either None means no such bound."""
    stored = None if document_ids is None else [stored_id(d, project) for d in document_ids]
    if where is not None:
        stored = store.documents_where(where, project, stored)
    shared = not store.holds_only(project)
    allowed = None
    if stored is not None or shared:
        allowed = store.chunk_ids(stored, project=project)
    return SearchScope(stored, allowed, shared)
