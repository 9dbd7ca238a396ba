"""Document ids per project: each project names its documents in its own id space.

The store keeps one `documents.id` column, the primary key that chunks and files reference and
the change log carries. A `default` project's document is stored under the id it was given (so
libraries written before projects keep their rows as they were); another project's is stored
qualified, as `project/id`. Ids given by clients never hold a `/`
(`retriever.library.documents`), nor do project names, so `a/x` can only be project `a`'s `x`
and never collides with an id another project gave.

The qualification lives inside the library: `retriever.library.facade` and the file and vector
store records (`retriever.objects`) qualify the ids they are handed and strip what they return,
so a client only ever sees the ids it gave.
"""

from __future__ import annotations

from dataclasses import replace

from retriever.library.records import DEFAULT_PROJECT, ChunkRow, DocumentRow

SEPARATOR = "/"


def stored_id(doc_id: str, project: str) -> str:
    """The id `project`'s document `doc_id` is stored under."""
    return doc_id if project == DEFAULT_PROJECT else f"{project}{SEPARATOR}{doc_id}"


def client_id(stored: str, project: str) -> str:
    """The id `project` gave its document stored as `stored` (`stored_id` undone)."""
    if project == DEFAULT_PROJECT:
        return stored
    return stored.removeprefix(f"{project}{SEPARATOR}")


def client_document(row: DocumentRow) -> DocumentRow:
    """A stored document as its project names it."""
    return replace(row, id=client_id(row.id, row.project))


def client_chunk(row: ChunkRow, project: str) -> ChunkRow:
    """A stored chunk of `project`'s, naming its document as the project does."""
    return replace(row, document_id=client_id(row.document_id, project))
