"""An upload's form and each uploaded file's text, with every way reading them can fail turned
into its HTTP error.

Shared by ``/v1/documents`` and ``/v1/files``: the body is read within the settings' size limits
as it streams in, and extraction runs off the event loop (HTML and PDF in a killable child)
within the time and expansion budgets of the settings.
"""

from __future__ import annotations

from fastapi import Request

from gateway.http.errors import APIError
from gateway.http.multipart import (
    MalformedUpload,
    UploadedFile,
    UploadForm,
    UploadLimits,
    UploadTooLarge,
    read_multipart_form,
)
from gateway.settings import Settings


async def upload_form(
    request: Request, content_type: str, settings: Settings, max_files: int
) -> UploadForm:
    """The multipart body's files and fields: 413 past a size limit or ``max_files``, 400 when
    it is not well-formed."""
    limits = UploadLimits(
        max_file_bytes=settings.max_document_bytes,
        max_files=max_files,
        max_total_bytes=settings.max_ingest_request_bytes,
    )
    try:
        return await read_multipart_form(content_type, request.stream(), limits)
    except UploadTooLarge as exc:
        raise APIError(413, str(exc), param="file") from exc
    except MalformedUpload as exc:
        raise APIError(400, str(exc), param="file") from exc


async def upload_text(upload: UploadedFile, settings: Settings) -> str:
    """415 unsupported type, 413 text too large, 422 too slow to read, 400 unreadable."""
    from retriever import (
        ExtractBudget,
        ExtractionTimeout,
        InvalidDocument,
        TextTooLarge,
        UnsupportedMediaType,
        extract_upload,
    )

    budget = ExtractBudget(
        settings.extract_timeout, settings.extract_max_expansion, settings.max_document_bytes
    )
    try:
        return await extract_upload(upload.filename, upload.content_type, upload.data, budget)
    except UnsupportedMediaType as exc:
        raise APIError(415, str(exc), param="file") from exc
    except TextTooLarge as exc:
        raise APIError(413, str(exc), param="file") from exc
    except ExtractionTimeout as exc:
        raise APIError(422, str(exc), param="file") from exc
    except InvalidDocument as exc:
        raise APIError(400, str(exc), param="file") from exc
