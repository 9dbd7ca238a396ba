"""What callers hand the library and get back, and the checks a batch of new documents must pass."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from retriever.ingest.chunking import Chunking, normalize_text
from retriever.library.records import DEFAULT_PROJECT, ChunkRow, DocumentStatus

_DOCUMENT_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:@+-]{0,255}")


@dataclass(frozen=True)
class NewDocument:
    """A document to ingest; `id=None` lets the library name it, `chunking=None` chunks it the
    library's default way."""

    id: str | None
    text: str
    metadata: dict[str, Any] | None = None
    chunking: Chunking | None = None


def document_key(text_hash: str, chunking: Chunking, default: Chunking, project: str) -> str:
    """What stored documents are told apart by (the `content_hash` column, unique): the hash of
    the text, after the project unless it is `default` (`project:hash`), followed by the chunking
    when it is not the library's default. The same text chunked two ways, or stored by two
    projects, is two documents; a document stored before chunking could be chosen, or before
    projects, has the plain hash."""
    key = text_hash if project == DEFAULT_PROJECT else f"{project}:{text_hash}"
    if chunking == default:
        return key
    return f"{key}/{chunking.max_tokens}/{chunking.overlap_tokens}"


def key_chunking(key: str, default: Chunking) -> Chunking:
    """The chunking a document of this key was cut with (`document_key` read back; project
    names hold no `/`)."""
    _, *sizes = key.split("/")
    if not sizes:
        return default
    max_tokens, overlap_tokens = (int(size) for size in sizes)
    return Chunking(max_tokens, overlap_tokens)


@dataclass(frozen=True)
class IngestResult:
    """`created` is False when the content was already stored; `id` is then the stored document."""

    id: str
    created: bool
    num_chunks: int
    status: DocumentStatus


MetadataCondition = Callable[[dict[str, Any]], bool]
"""Whether a document's `metadata` lets its chunks be found (a search's filter)."""


@dataclass(frozen=True)
class Hit:
    """One retrieved chunk; `score` is the cosine similarity to the query in dense search, the
    fused rank score in [0, 1] otherwise (`retriever.search.ranking`). `text` is
    `document_text[start_char:end_char]` of the document's extracted text (None, None for a
    chunk stored before spans were kept)."""

    document_id: str
    chunk_index: int
    chunk_id: int
    score: float
    text: str
    token_ids: list[int]
    start_char: int | None
    end_char: int | None

    @classmethod
    def found(cls, row: ChunkRow, score: float, document_id: str) -> Hit:
        """The hit of a stored chunk, its document named `document_id` (as the caller names it)."""
        return cls(
            document_id,
            row.chunk_index,
            row.id,
            score,
            row.text,
            row.token_ids,
            row.start_char,
            row.end_char,
        )


class InvalidIngest(ValueError):
    """A batch of documents was rejected as a whole; the message names the offending item."""


class EmptyDocument(InvalidIngest):
    pass


class DuplicateDocumentId(InvalidIngest):
    pass


class InvalidDocumentId(InvalidIngest):
    pass


class InvalidMetadata(InvalidIngest):
    pass


class InvalidText(InvalidIngest):
    """Text that is not valid Unicode (a lone surrogate such as JSON's `"\\ud800"`)."""


def validated_texts(documents: Sequence[NewDocument]) -> list[str]:
    """Normalized text of every document, or an `InvalidIngest` for the first bad one."""
    texts: list[str] = []
    seen_ids: set[str] = set()
    for position, document in enumerate(documents):
        where = f"documents[{position}]"
        if document.id is not None:
            if not _DOCUMENT_ID.fullmatch(document.id):
                raise InvalidDocumentId(
                    f"{where}: id {document.id!r} must be 1-256 letters, digits or ._:@+- "
                    "and start with a letter or digit"
                )
            if document.id in seen_ids:
                raise DuplicateDocumentId(
                    f"{where}: id {document.id!r} appears twice in the request"
                )
            seen_ids.add(document.id)
        if document.metadata is not None:
            _check_metadata(where, document.metadata)
        text = normalize_text(document.text)
        try:
            text.encode("utf-8")
        except UnicodeEncodeError as error:
            raise InvalidText(
                f"{where}: text has an unpaired surrogate at character {error.start}"
            ) from error
        if not text.strip():
            raise EmptyDocument(f"{where}: text is empty")
        texts.append(text)
    return texts


def _check_metadata(where: str, metadata: dict[str, Any]) -> None:
    if not isinstance(metadata, dict):
        raise InvalidMetadata(f"{where}: metadata must be an object")
    try:
        json.dumps(metadata, allow_nan=False, ensure_ascii=False).encode("utf-8")
    except (TypeError, ValueError) as error:  # UnicodeEncodeError: a lone surrogate
        raise InvalidMetadata(f"{where}: metadata is not plain JSON ({error})") from error
