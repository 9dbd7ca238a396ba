"""Parameters shared by the vector store routes, checked in OpenAI's terms, and their 404s."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from gateway.http.errors import APIError
from gateway.openai.validation import check_attributes, check_text
from retriever import Attachment, UnknownFiles

MAX_EXPIRY_DAYS = 365
MAX_BATCH_FILES = 2000


def expiry_days(expires_after: dict[str, Any] | None) -> int | None:
    if expires_after is None:
        return None
    days = expires_after["days"]
    if not 1 <= days <= MAX_EXPIRY_DAYS:
        raise APIError(
            400,
            f"'expires_after.days' must be 1 to {MAX_EXPIRY_DAYS}, not {days}.",
            param="expires_after.days",
        )
    return days


def attachments_for(
    file_ids: Sequence[str], attributes: dict[str, Any] | None, param: str = "file_ids"
) -> list[Attachment]:
    if len(file_ids) > MAX_BATCH_FILES:
        raise APIError(400, f"At most {MAX_BATCH_FILES} files at once.", param=param)
    checked = check_attributes(attributes)
    return [Attachment(check_text(file_id, param), checked) for file_id in file_ids]


def unknown_files(exc: UnknownFiles, param: str) -> APIError:
    return APIError(404, f"{exc} Nothing was attached.", param=param, code="not_found")


def vector_store_not_found(vector_store_id: str) -> APIError:
    return APIError(
        404,
        f"No vector store found with id '{vector_store_id}'.",
        param="vector_store_id",
        code="not_found",
    )
