"""Child process that extracts one upload's text, so the server can kill it when it runs too long.

Run as `python -m retriever.ingest.extract_worker`. Standard input: one JSON line
`{"filename", "content_type", "max_text_bytes", "max_memory_bytes"}`, then the file's bytes.
Standard output: one JSON object, `{"text": ...}` or `{"error": KIND, "message": ...}` with KIND
`invalid` or `too_large`. Its address space is capped, so a decompression bomb
ends in a `too_large` answer (or a crash) instead of swapping the host.
"""

from __future__ import annotations

import json
import logging
import sys
import warnings
from typing import Any

from retriever.ingest.extract import InvalidDocument, TextTooLarge, extract_text

ERROR_KINDS: tuple[tuple[type[Exception], str], ...] = (
    (InvalidDocument, "invalid"),
    (TextTooLarge, "too_large"),
)


def answer(request: dict[str, Any], data: bytes) -> dict[str, str]:
    """The JSON answer for one file (what `main` writes)."""
    name = request["filename"] or "the upload"
    try:
        text = extract_text(
            request["filename"], request["content_type"], data, request["max_text_bytes"]
        )
    except MemoryError:
        return {
            "error": "too_large",
            "message": f"{name} needs more memory to read than an upload may use",
        }
    except ValueError as error:
        for error_type, kind in ERROR_KINDS:
            if isinstance(error, error_type):
                return {"error": kind, "message": str(error)}
        raise
    return {"text": text}


def _cap_memory(limit: int | None) -> None:
    try:
        import resource
    except ImportError:  # not on POSIX: the time budget still applies
        return
    if limit is not None:
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


def main() -> None:
    # pypdf warns about every oddity of a damaged file: the output would grow without bound.
    logging.disable(logging.CRITICAL)
    warnings.simplefilter("ignore")
    request = json.loads(sys.stdin.buffer.readline())
    data = sys.stdin.buffer.read()
    _cap_memory(request.get("max_memory_bytes"))
    reply = json.dumps(answer(request, data), ensure_ascii=False)
    sys.stdout.buffer.write(reply.encode("utf-8"))


if __name__ == "__main__":
    main()
