"""Turn uploaded files into plain text: UTF-8 text and Markdown, HTML, PDF if `pypdf` is present."""

from __future__ import annotations

import io
from pathlib import PurePosixPath

from retriever.chunking import normalize_text
from retriever.html_text import html_to_text

_KIND_BY_SUFFIX = {
    ".txt": "text",
    ".text": "text",
    ".md": "text",
    ".markdown": "text",
    ".html": "html",
    ".htm": "html",
    ".pdf": "pdf",
}
_KIND_BY_MEDIA_TYPE = {
    "text/plain": "text",
    "text/markdown": "text",
    "text/x-markdown": "text",
    "text/html": "html",
    "application/xhtml+xml": "html",
    "application/pdf": "pdf",
}
_SUPPORTED = ".txt, .md, .html, .htm, .pdf"


class UnsupportedMediaType(ValueError):
    """The file's type cannot be turned into text (unknown type, or PDF without `pypdf`)."""


class InvalidDocument(ValueError):
    """The file claims a supported type but its content cannot be read as that type."""


def extract_text(filename: str, content_type: str | None, data: bytes) -> str:
    """Normalized plain text of an uploaded file.

    The type comes from the file name's extension, else from `content_type`. Raises
    `UnsupportedMediaType` or `InvalidDocument` (both `ValueError`s) with a message for the user.
    """
    kind = _document_kind(filename, content_type)
    if kind == "pdf":
        text = _pdf_text(filename, data)
    else:
        decoded = _decode_utf8(filename, data)
        text = html_to_text(decoded) if kind == "html" else decoded
    text = normalize_text(text)
    if not text.strip():
        raise InvalidDocument(f"{filename or 'the upload'} contains no text")
    return text


def _document_kind(filename: str, content_type: str | None) -> str:
    suffix = PurePosixPath(filename.replace("\\", "/")).suffix.lower()
    media_type = (content_type or "").split(";", 1)[0].strip().lower()
    kind = _KIND_BY_SUFFIX.get(suffix) or _KIND_BY_MEDIA_TYPE.get(media_type)
    if kind is None:
        described = f"{filename or 'unnamed file'} ({media_type or 'no content type'})"
        raise UnsupportedMediaType(f"cannot read {described}: supported types are {_SUPPORTED}")
    return kind


def _decode_utf8(filename: str, data: bytes) -> str:
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        raise InvalidDocument(
            f"{filename or 'the upload'} is not valid UTF-8 text (bad byte at offset "
            f"{error.start}); convert it to UTF-8 and upload it again"
        ) from error


def _pdf_text(filename: str, data: bytes) -> str:
    from pypdf import PdfReader
    from pypdf.errors import PyPdfError

    try:
        pages = [page.extract_text() or "" for page in PdfReader(io.BytesIO(data)).pages]
    except (PyPdfError, ValueError) as error:
        raise InvalidDocument(
            f"{filename or 'the upload'} is not a readable PDF: {error}"
        ) from error
    return "\n\n".join(pages)
