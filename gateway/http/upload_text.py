"""An uploaded file's text, with every way reading it can fail turned into its HTTP error.

Shared by ``/v1/documents`` and ``/v1/files``: extraction runs off the event loop (HTML and PDF in
a killable child) within the time and expansion budgets of the settings.
"""

from __future__ import annotations

from gateway.http.errors import APIError
from gateway.http.multipart import UploadedFile
from gateway.settings import Settings


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
