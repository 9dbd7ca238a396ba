"""Small PDFs built by hand for the extraction tests: ordinary, slow to read, or hugely expanding.

A page's content stream is Flate-compressed, so a few kilobytes of file can hold megabytes of
drawing operators (slow for pypdf to parse) or of text (a decompression bomb for the text budget).
"""

from __future__ import annotations

import zlib


def pdf_with_pages(*contents: bytes) -> bytes:
    """A PDF with one page per content stream, Helvetica as font F1, cross-references correct."""
    page_numbers = [4 + 2 * index for index in range(len(contents))]
    kids = " ".join(f"{number} 0 R" for number in page_numbers).encode()
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [%s] /Count %d >>" % (kids, len(contents)),
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    ]
    for number, content in zip(page_numbers, contents, strict=True):
        packed = zlib.compress(content, 9)
        objects.append(
            b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] "
            b"/Resources << /Font << /F1 3 0 R >> >> /Contents %d 0 R >>" % (number + 1)
        )
        objects.append(
            b"<< /Length %d /Filter /FlateDecode >>\nstream\n" % len(packed)
            + packed
            + b"\nendstream"
        )
    out, offsets = bytearray(b"%PDF-1.4\n"), []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % number + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % offset for offset in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (
        len(objects) + 1,
        xref,
    )
    return bytes(out)


def text_page(*lines: str) -> bytes:
    """A content stream showing `lines`, one below the other."""
    shown = b"".join(b"(%s) Tj 0 -14 Td\n" % line.encode("latin-1") for line in lines)
    return b"BT /F1 12 Tf 72 720 Td\n" + shown + b"ET"


def simple_pdf(text: str) -> bytes:
    """One page showing `text`."""
    return pdf_with_pages(text_page(text))


def expanding_pdf(megabytes: int) -> bytes:
    """A few kilobytes that hold about `megabytes` MB of text."""
    line = "All work and no play makes a dull document. " * 2
    return pdf_with_pages(text_page(*[line] * (megabytes * 11_000)))


def slow_pdf(megabytes: int) -> bytes:
    """A few kilobytes whose one page draws nothing with `megabytes` MB of operators: no text, and
    about a second of pypdf's time per megabyte."""
    return pdf_with_pages(b"q Q\n" * (megabytes * 262_144))
