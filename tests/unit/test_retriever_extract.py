"""Uploads become text: UTF-8 text and Markdown, HTML without markup, PDF only with pypdf."""

import pytest

from retriever.ingest.extract import (
    InvalidDocument,
    TextTooLarge,
    UnsupportedMediaType,
    extract_text,
)

PAGE = b"""<!doctype html>
<html><head><title>Release notes</title>
<style>body { color: red; }</style>
<script>window.track("visit");</script></head>
<body>
  <h1>Version 2</h1>
  <p>Faster   start-up &amp; smaller
     downloads.</p>
  <ul><li>First change</li><li>Second<br>change</li></ul>
  <noscript>Enable JavaScript</noscript>
  <div>Caf&eacute; &lt;ok&gt;</div>
</body></html>"""


def test_plain_text_and_markdown_are_read_as_utf8():
    assert (
        extract_text("notes.txt", "text/plain", "Grüße\r\n\r\n\r\nWelt ".encode())
        == "Grüße\n\nWelt"
    )
    assert extract_text("README.md", None, b"# Title\n\nBody\n") == "# Title\n\nBody"


def test_byte_order_mark_is_dropped():
    assert extract_text("bom.txt", None, b"\xef\xbb\xbfhello") == "hello"


def test_invalid_utf8_is_rejected_with_its_offset():
    with pytest.raises(InvalidDocument, match=r"notes\.txt is not valid UTF-8.*offset 3"):
        extract_text("notes.txt", "text/plain", b"abc\xff\xfedef")


def test_html_keeps_visible_text_in_paragraphs():
    text = extract_text("page.html", "text/html", PAGE)
    assert text == (
        "Release notes\n\nVersion 2\n\nFaster start-up & smaller downloads.\n\n"
        "First change\n\nSecond\nchange\n\nCafé <ok>"
    )


def test_type_falls_back_to_the_content_type():
    assert extract_text("upload", "text/html; charset=utf-8", b"<p>a</p><p>b</p>") == "a\n\nb"
    assert extract_text("", "text/markdown", b"*hi*") == "*hi*"


def test_extension_is_case_insensitive():
    assert extract_text("PAGE.HTM", None, b"<b>bold</b>") == "bold"


def test_unknown_types_are_unsupported():
    with pytest.raises(UnsupportedMediaType, match=r"report\.docx.*supported types are"):
        extract_text("report.docx", "application/octet-stream", b"PK\x03\x04")
    with pytest.raises(UnsupportedMediaType, match="no content type"):
        extract_text("blob", None, b"data")


def test_files_without_text_are_invalid():
    with pytest.raises(InvalidDocument, match="contains no text"):
        extract_text("empty.txt", None, b" \n\n ")
    with pytest.raises(InvalidDocument, match="contains no text"):
        extract_text("scripts.html", None, b"<script>only()</script>")


def test_both_errors_are_value_errors():
    assert issubclass(InvalidDocument, ValueError)
    assert issubclass(UnsupportedMediaType, ValueError)


def test_text_over_its_budget_is_refused_with_the_file_name():
    assert extract_text("notes.txt", None, b"four", max_text_bytes=4) == "four"
    with pytest.raises(TextTooLarge, match=r"notes\.txt holds more than 3 bytes of text"):
        extract_text("notes.txt", None, b"four", max_text_bytes=3)
