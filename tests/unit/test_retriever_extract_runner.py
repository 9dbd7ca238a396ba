"""Uploads are read off the event loop, in a child process with a time and an expansion budget."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from retriever.ingest.extract import InvalidDocument, TextTooLarge, UnsupportedMediaType
from retriever.ingest.extract_runner import (
    WORKER_MODULE,
    ExtractBudget,
    ExtractionTimeout,
    extract_upload,
)
from tests.unit.pdf_files import expanding_pdf, pdf_with_pages, simple_pdf, slow_pdf, text_page

pytest.importorskip("pypdf")
GENEROUS = ExtractBudget(timeout=120, max_expansion=10, max_text_bytes=1_000_000)


def extractor_children() -> list[int]:
    """Process ids of this process's children that run the text extractor (Linux only)."""
    children: list[int] = []
    for task in Path(f"/proc/{os.getpid()}/task").iterdir():
        children += [int(pid) for pid in (task / "children").read_text().split()]
    found = []
    for pid in children:
        try:
            command = Path(f"/proc/{pid}/cmdline").read_bytes()
        except FileNotFoundError:
            continue
        if WORKER_MODULE.encode() in command:
            found.append(pid)
    return found


needs_proc = pytest.mark.skipif(
    not Path(f"/proc/{os.getpid()}/task").is_dir(), reason="needs Linux /proc"
)


async def test_pdf_and_html_text_come_back_from_the_child() -> None:
    two_pages = pdf_with_pages(text_page("First page."), text_page("Second page."))
    assert await extract_upload("r.pdf", None, two_pages, GENEROUS) == "First page.\n\nSecond page."
    page = b"<h1>Title</h1><script>x()</script><p>Body &amp; more</p>"
    assert await extract_upload("p.html", None, page, GENEROUS) == "Title\n\nBody & more"
    assert await extract_upload("n.txt", "text/plain", b"plain\r\n", GENEROUS) == "plain"


async def test_reader_errors_keep_their_type_and_name_the_file() -> None:
    with pytest.raises(InvalidDocument, match=r"broken\.pdf is not a readable PDF"):
        await extract_upload("broken.pdf", None, b"%PDF-1.4 not really", GENEROUS)
    with pytest.raises(InvalidDocument, match=r"blank\.pdf contains no text"):
        await extract_upload("blank.pdf", None, slow_pdf(0), GENEROUS)
    with pytest.raises(UnsupportedMediaType, match=r"tool\.exe"):
        await extract_upload("tool.exe", None, b"MZ", GENEROUS)


async def test_a_pdf_that_expands_past_its_budget_is_refused() -> None:
    bomb = expanding_pdf(1)
    budget = ExtractBudget(timeout=120, max_expansion=10, max_text_bytes=10_000_000)
    with pytest.raises(TextTooLarge, match=rf"bomb\.pdf holds more than {10 * len(bomb)} bytes"):
        await extract_upload("bomb.pdf", None, bomb, budget)


async def test_the_document_limit_caps_the_budget_when_it_is_smaller() -> None:
    page = simple_pdf("A sentence of forty characters or so....")
    assert await extract_upload("ok.pdf", None, page, GENEROUS)
    tight = ExtractBudget(timeout=120, max_expansion=10, max_text_bytes=20)
    with pytest.raises(TextTooLarge, match=r"ok\.pdf holds more than 20 bytes"):
        await extract_upload("ok.pdf", None, page, tight)


@needs_proc
async def test_a_slow_pdf_is_stopped_at_the_deadline_and_the_loop_keeps_running() -> None:
    ticks = 0

    async def heartbeat() -> None:
        nonlocal ticks
        while True:
            await asyncio.sleep(0.01)
            ticks += 1

    beating = asyncio.create_task(heartbeat())
    budget = ExtractBudget(timeout=1, max_expansion=10, max_text_bytes=1_000_000)
    with pytest.raises(ExtractionTimeout, match=r"slow\.pdf took longer than 1 s and was stopped"):
        await extract_upload("slow.pdf", None, slow_pdf(10), budget)
    beating.cancel()
    assert ticks > 0  # the event loop served other work while the child was reading
    assert extractor_children() == []


@needs_proc
async def test_a_cancelled_request_kills_its_child() -> None:
    reading = asyncio.create_task(extract_upload("slow.pdf", None, slow_pdf(10), GENEROUS))
    while not extractor_children():
        assert not reading.done(), reading
        await asyncio.sleep(0.01)
    reading.cancel()
    with pytest.raises(asyncio.CancelledError):
        await reading
    assert extractor_children() == []
