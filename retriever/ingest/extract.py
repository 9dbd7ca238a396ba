"""Turn uploaded files into plain text: UTF-8 text and Markdown, HTML, PDF if `pypdf` is present.

Pure functions, run by the gateway in a child process for HTML and PDF (see `extract_runner`):
a PDF of a few kilobytes can hold megabytes of text, so the text is counted as it is extracted,
page by page and piece by piece, and extraction stops once it passes the caller's budget.
"""

from __future__ import annotations

import io
from pathlib import PurePosixPath

from retriever.ingest.chunking import normalize_text
from retriever.ingest.html_text import html_to_text

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


class TextTooLarge(ValueError):
    """The file's text passes the budget it was given (a file that expands too much)."""


def extract_text(
    filename: str, content_type: str | None, data: bytes, max_text_bytes: int | None = None
) -> str:
    """Normalized plain text of an uploaded file, at most `max_text_bytes` of UTF-8 if given.

    The type comes from the file name's extension, else from `content_type`. Raises
    `UnsupportedMediaType`, `InvalidDocument` or `TextTooLarge` (all `ValueError`s) with a message
    for the user.
    """
    name = filename or "the upload"
    kind = document_kind(filename, content_type)
    if kind == "pdf":
        text = _pdf_text(filename, data, _TextBudget(name, max_text_bytes))
    else:
        decoded = _decode_utf8(filename, data)
        text = html_to_text(decoded) if kind == "html" else decoded
    text = normalize_text(text).encode("utf-8", "replace").decode("utf-8")
    _TextBudget(name, max_text_bytes).spend(text)
    if not text.strip():
        raise InvalidDocument(f"{filename or 'the upload'} contains no text")
    return text


def document_kind(filename: str, content_type: str | None) -> str:
    """`text`, `html` or `pdf`; raises `UnsupportedMediaType` for anything else."""
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


def _pdf_text(filename: str, data: bytes, budget: _TextBudget) -> str:
    """Pages' text joined by blank lines; every piece pypdf finds is counted against `budget`."""
    from pypdf import PdfReader

    pages: list[str] = []
    try:
        for page in PdfReader(io.BytesIO(data)).pages:
            page_budget = budget.page()
            pages.append(page.extract_text(visitor_text=page_budget.visit) or "")
            budget.spend(pages[-1])
    except (TextTooLarge, MemoryError):
        raise
    except Exception as error:  # pypdf raises many types on damaged or hostile files
        raise InvalidDocument(
            f"{filename or 'the upload'} is not a readable PDF: {error}"
        ) from error
    return "\n\n".join(pages)


class _TextBudget:
    """UTF-8 bytes of text extracted so far, against a limit (None: unlimited)."""

    def __init__(self, name: str, limit: int | None, used: int = 0) -> None:
        self.name = name
        self.limit = limit
        self.used = used

    def spend(self, text: str) -> None:
        self.used += len(text.encode("utf-8", "surrogatepass"))
        if self.limit is not None and self.used > self.limit:
            raise TextTooLarge(
                f"{self.name} holds more than {self.limit} bytes of text, the most a file of "
                "its size may expand to; split it or upload its text instead"
            )

    def page(self) -> _TextBudget:
        """A budget for one more page: pieces seen on it count on top of the pages before."""
        return _TextBudget(self.name, self.limit, self.used)

    def visit(self, text: str, *_: object) -> None:
        """pypdf's `visitor_text` callback: stops extraction as soon as the budget is passed."""
        self.spend(text)
