"""Library records as OpenAI's objects, built with the ``openai`` package's own models so the
shapes cannot drift from what the SDK parses. ragblend's additions sit under ``ragblend``."""

from __future__ import annotations

from typing import Any

from openai import BaseModel
from openai.types import FileObject, VectorStore
from openai.types.vector_stores import VectorStoreFile, VectorStoreFileBatch

from retriever import (
    BatchRecord,
    FileCounts,
    FileRecord,
    StoreFileRecord,
    VectorStoreRecord,
)


def dump(model: BaseModel) -> dict[str, Any]:
    """The JSON body of a model: the fields it was given, nulls included."""
    return model.model_dump(mode="json", exclude_unset=True)


def file_object(record: FileRecord) -> dict[str, Any]:
    return dump(
        FileObject(
            id=record.id,
            object="file",
            bytes=record.bytes,
            created_at=record.created_at,
            filename=record.filename,
            purpose=record.purpose,  # type: ignore[arg-type]
            status="processed",
            expires_at=None,
        )
    )


def _counts(counts: FileCounts) -> dict[str, int]:
    return {
        "in_progress": counts.in_progress,
        "completed": counts.completed,
        "failed": 0,
        "cancelled": 0,
        "total": counts.total,
    }


def vector_store_object(record: VectorStoreRecord) -> dict[str, Any]:
    days = record.expires_after_days
    expires_after = None if days is None else {"anchor": "last_active_at", "days": days}
    return dump(
        VectorStore(
            id=record.id,
            object="vector_store",
            created_at=record.created_at,
            name=record.name,
            description=record.description,
            usage_bytes=record.usage_bytes,
            file_counts=_counts(record.file_counts),  # type: ignore[arg-type]
            status=record.status,  # type: ignore[arg-type]
            expires_after=expires_after,  # type: ignore[arg-type]
            expires_at=record.expires_at,
            last_active_at=record.last_active_at,
            metadata=record.metadata,
        )
    )


def vector_store_file_object(
    record: StoreFileRecord, chunking_strategy: dict[str, Any]
) -> dict[str, Any]:
    """``ragblend.document_status`` is ``indexed`` until every chunk's KV is stored, then
    ``cached``; ``failed`` when precomputing it failed (the file stays searchable)."""
    return dump(
        VectorStoreFile(
            id=record.file_id,
            object="vector_store.file",
            created_at=record.created_at,
            vector_store_id=record.vector_store_id,
            status=record.status,  # type: ignore[arg-type]
            last_error=None,
            usage_bytes=record.usage_bytes,
            attributes=record.attributes,
            chunking_strategy=chunking_strategy,  # type: ignore[arg-type]
            ragblend={
                "document_id": record.document_id,
                "document_status": record.document_status,
                "num_chunks": record.num_chunks,
            },
        )
    )


def batch_object(record: BatchRecord) -> dict[str, Any]:
    return dump(
        VectorStoreFileBatch(
            id=record.id,
            object="vector_store.files_batch",
            created_at=record.created_at,
            vector_store_id=record.vector_store_id,
            status=record.status,  # type: ignore[arg-type]
            file_counts=_counts(record.file_counts),  # type: ignore[arg-type]
        )
    )


def deleted(object_id: str, kind: str) -> dict[str, Any]:
    return {"id": object_id, "object": kind, "deleted": True}
