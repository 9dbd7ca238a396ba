"""PDF uploads through pypdf, page by page, within a budget of extracted text."""

from __future__ import annotations

import pytest

from retriever.ingest.extract import InvalidDocument, TextTooLarge, extract_text
from tests.unit.pdf_files import expanding_pdf, pdf_with_pages, simple_pdf, text_page

pytest.importorskip("pypdf")


def test_pdf_text_is_extracted() -> None:
    page = simple_pdf("The capital of Narnia is Cair.")
    text = extract_text("report.pdf", "application/pdf", page)
    assert "The capital of Narnia is Cair." in text


def test_pages_become_paragraphs() -> None:
    pages = pdf_with_pages(text_page("One.", "Two."), text_page("Three."))
    assert extract_text("book.pdf", None, pages) == "One.\nTwo.\n\nThree."


def test_a_damaged_pdf_is_refused() -> None:
    with pytest.raises(InvalidDocument, match=r"report\.pdf is not a readable PDF"):
        extract_text("report.pdf", "application/pdf", b"%PDF-1.4 this is not a pdf")


def test_text_over_the_budget_stops_extraction() -> None:
    with pytest.raises(TextTooLarge, match=r"bomb\.pdf holds more than 50000 bytes of text"):
        extract_text("bomb.pdf", None, expanding_pdf(1), max_text_bytes=50_000)


def test_the_budget_counts_every_page() -> None:
    line = "x" * 600
    pages = pdf_with_pages(*[text_page(line) for _ in range(5)])
    assert len(extract_text("five.pdf", None, pages, max_text_bytes=5_000)) > 3_000
    with pytest.raises(TextTooLarge, match=r"five\.pdf"):
        extract_text("five.pdf", None, pages, max_text_bytes=2_000)
