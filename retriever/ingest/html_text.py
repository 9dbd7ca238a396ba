"""Readable text from HTML: tags, scripts and styles dropped, block elements become paragraphs."""

from __future__ import annotations

import re
from html.parser import HTMLParser

_HIDDEN_TAGS = frozenset({"script", "style", "noscript", "template", "svg"})
_BLOCK_TAGS = frozenset(
    [
        "address",
        "article",
        "aside",
        "blockquote",
        "dd",
        "details",
        "div",
        "dl",
        "dt",
        "figcaption",
        "figure",
        "footer",
        "form",
        "h1",
        "h2",
        "h3",
        "h4",
        "h5",
        "h6",
        "header",
        "hr",
        "li",
        "main",
        "nav",
        "ol",
        "p",
        "pre",
        "section",
        "summary",
        "table",
        "td",
        "th",
        "title",
        "tr",
        "ul",
    ]
)
_PARAGRAPH = "\n\n"
_LINE_BREAK_TAG = "br"
_PARAGRAPH_SPLIT = re.compile(r"\n\s*\n")


def html_to_text(markup: str) -> str:
    """Visible text of `markup`, one paragraph per block element, whitespace collapsed."""
    parser = _TextCollector()
    parser.feed(markup)
    parser.close()
    paragraphs = (_clean_paragraph(part) for part in _PARAGRAPH_SPLIT.split("".join(parser.parts)))
    return _PARAGRAPH.join(part for part in paragraphs if part)


def _clean_paragraph(paragraph: str) -> str:
    lines = (" ".join(line.split()) for line in paragraph.split("\n"))
    return "\n".join(line for line in lines if line)


class _TextCollector(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self._hidden_depth = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in _HIDDEN_TAGS:
            self._hidden_depth += 1
        if tag == _LINE_BREAK_TAG:
            self.parts.append("\n")
        elif tag in _BLOCK_TAGS:
            self.parts.append(_PARAGRAPH)

    def handle_endtag(self, tag: str) -> None:
        if tag in _HIDDEN_TAGS and self._hidden_depth:
            self._hidden_depth -= 1
        if tag in _BLOCK_TAGS:
            self.parts.append(_PARAGRAPH)

    def handle_data(self, data: str) -> None:
        if self._hidden_depth == 0:
            self.parts.append(data.replace("\n", " "))
