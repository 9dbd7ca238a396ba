"""PDF uploads through pypdf."""

from __future__ import annotations

import pytest

from retriever.extract import InvalidDocument, extract_text


def _pdf(text: str) -> bytes:
    """A one-page PDF showing ``text``, built by hand with a correct cross-reference table."""
    stream = f"BT /F1 12 Tf 72 720 Td ({text}) Tj ET".encode()
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] "
        b"/Resources << /Font << /F1 4 0 R >> >> /Contents 5 0 R >>",
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
        b"<< /Length %d >>\nstream\n" % len(stream) + stream + b"\nendstream",
    ]
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


def test_pdf_text_is_extracted() -> None:
    pytest.importorskip("pypdf")
    text = extract_text("report.pdf", "application/pdf", _pdf("The capital of Narnia is Cair."))
    assert "The capital of Narnia is Cair." in text


def test_a_damaged_pdf_is_refused() -> None:
    pytest.importorskip("pypdf")
    with pytest.raises(InvalidDocument):
        extract_text("report.pdf", "application/pdf", b"%PDF-1.4 this is not a pdf")
