"""Extract an upload's text off the event loop, within a time and an expansion budget per file.

Plain text is decoded in a thread: linear work whose output is never larger than the file. HTML and
PDF go to a child process (`retriever.ingest.extract_worker`): a small hostile file can drive their
parsers into minutes of work, and a thread cannot be stopped, a process can. The child is killed
when the time budget runs out or the request is cancelled; at most one child per CPU runs at once.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import sys
from dataclasses import dataclass
from pathlib import Path

from retriever.ingest.extract import InvalidDocument, TextTooLarge, document_kind, extract_text

logger = logging.getLogger(__name__)
WORKER_MODULE = "retriever.ingest.extract_worker"
CHILD_MEMORY_BYTES = 2 << 30
_PACKAGE_PARENT = Path(__file__).resolve().parents[2]


class ExtractionTimeout(ValueError):
    """Reading the file's text took longer than the time budget; the work was stopped."""


@dataclass(frozen=True)
class ExtractBudget:
    """`timeout` seconds per file; text at most `max_expansion` x the file, and `max_text_bytes`."""

    timeout: float
    max_expansion: float
    max_text_bytes: int

    def text_bytes_for(self, file_size: int) -> int:
        return max(1, min(int(self.max_expansion * file_size), self.max_text_bytes))


async def extract_upload(
    filename: str, content_type: str | None, data: bytes, budget: ExtractBudget
) -> str:
    """Normalized text of one upload, as `retriever.extract.extract_text` gives it.

    Raises what `extract_text` raises, and `ExtractionTimeout`; never blocks the event loop.
    """
    kind = document_kind(filename, content_type)
    max_text_bytes = budget.text_bytes_for(len(data))
    if kind == "text":
        return await asyncio.to_thread(extract_text, filename, content_type, data, max_text_bytes)
    request = {
        "filename": filename,
        "content_type": content_type,
        "max_text_bytes": max_text_bytes,
        "max_memory_bytes": CHILD_MEMORY_BYTES,
    }
    async with _child_slots.for_running_loop():
        reply = await _run_child(filename or "the upload", request, data, budget.timeout)
    if "text" in reply:
        return reply["text"]
    if reply.get("error") == "too_large":
        raise TextTooLarge(reply["message"])
    raise InvalidDocument(reply["message"])


async def _run_child(name: str, request: dict[str, object], data: bytes, timeout: float) -> dict:
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        WORKER_MODULE,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        cwd=_PACKAGE_PARENT,
    )
    message = json.dumps(request).encode() + b"\n" + data
    try:
        stdout, stderr = await asyncio.wait_for(process.communicate(message), timeout)
    except TimeoutError:
        raise ExtractionTimeout(
            f"Reading the text of {name} took longer than {timeout:g} s and was stopped; "
            "upload its text instead"
        ) from None
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
    try:
        return json.loads(stdout)
    except ValueError:
        logger.error(
            "the text extractor failed on %s (exit status %s): %s",
            name,
            process.returncode,
            stderr.decode("utf-8", "replace")[-2000:],
        )
        failure = f"{name} could not be read: the text extractor failed on it"
        raise InvalidDocument(failure) from None


class _ChildSlots:
    """A semaphore of one slot per CPU for the running event loop (a new loop gets a new one)."""

    def __init__(self) -> None:
        self._loop: asyncio.AbstractEventLoop | None = None
        self._semaphore: asyncio.Semaphore | None = None

    def for_running_loop(self) -> asyncio.Semaphore:
        loop = asyncio.get_running_loop()
        if loop is not self._loop or self._semaphore is None:
            self._loop, self._semaphore = loop, asyncio.Semaphore(os.cpu_count() or 1)
        return self._semaphore


_child_slots = _ChildSlots()
