"""Multipart uploads are parsed as they stream in and refused as soon as a limit is passed."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from gateway.http.multipart import (
    MAX_FIELD_BYTES,
    MalformedUpload,
    UploadedFile,
    UploadLimits,
    UploadTooLarge,
    read_multipart_form,
)

BOUNDARY = "form-boundary-7d2"
CONTENT_TYPE = f"multipart/form-data; boundary={BOUNDARY}"
ROOMY = UploadLimits(max_file_bytes=10_000, max_files=8, max_total_bytes=100_000)


def _part(name: str, data: bytes, filename: str | None = None, media: str | None = None) -> bytes:
    disposition = f'form-data; name="{name}"' + (f'; filename="{filename}"' if filename else "")
    headers = f"Content-Disposition: {disposition}\r\n"
    if media:
        headers += f"Content-Type: {media}\r\n"
    return f"--{BOUNDARY}\r\n{headers}\r\n".encode() + data + b"\r\n"


def _body(*parts: bytes) -> bytes:
    return b"".join(parts) + f"--{BOUNDARY}--\r\n".encode()


class Sender:
    """An upload arriving in pieces of `piece` bytes; counts how many were taken from it."""

    def __init__(self, body: bytes, piece: int = 1000) -> None:
        self.pieces = [body[start : start + piece] for start in range(0, len(body), piece)]
        self.taken = 0

    async def stream(self) -> AsyncIterator[bytes]:
        for piece in self.pieces:
            self.taken += 1
            yield piece


async def test_files_come_back_in_order_and_plain_fields_are_dropped() -> None:
    body = _body(
        _part("file", "Grüße\r\n\r\n--not a boundary".encode(), "notes.txt", "text/plain"),
        _part("purpose", b"assistants"),
        _part("file", b"<p>hi</p>", "page.html"),
    )
    files = (await read_multipart_form(CONTENT_TYPE, Sender(body, 7).stream(), ROOMY)).files
    assert files == [
        UploadedFile("notes.txt", "text/plain", "Grüße\r\n\r\n--not a boundary".encode()),
        UploadedFile("page.html", None, b"<p>hi</p>"),
    ]


async def test_a_file_over_its_limit_is_refused_before_the_rest_is_read() -> None:
    limits = UploadLimits(max_file_bytes=5_000, max_files=8, max_total_bytes=10_000_000)
    sender = Sender(_body(_part("file", b"x" * 1_000_000, "big.txt")))
    with pytest.raises(UploadTooLarge, match=r"File 'big\.txt' is larger than the limit of 5000"):
        await read_multipart_form(CONTENT_TYPE, sender.stream(), limits)
    assert sender.taken <= 7  # 5 kB in 1 kB pieces, plus the headers: not the whole megabyte


async def test_too_many_files_are_refused_at_the_first_extra_header() -> None:
    limits = UploadLimits(max_file_bytes=5_000, max_files=2, max_total_bytes=10_000_000)
    parts = [_part("file", b"y" * 900, f"f{index}.txt") for index in range(50)]
    sender = Sender(_body(*parts))
    with pytest.raises(UploadTooLarge, match="more than 2 files"):
        await read_multipart_form(CONTENT_TYPE, sender.stream(), limits)
    assert sender.taken < len(sender.pieces) // 10


async def test_the_whole_body_has_a_limit_too() -> None:
    limits = UploadLimits(max_file_bytes=5_000, max_files=100, max_total_bytes=20_000)
    parts = [_part("file", b"z" * 4_000, f"f{index}.txt") for index in range(20)]
    sender = Sender(_body(*parts))
    with pytest.raises(UploadTooLarge, match="larger than the limit of 20000 bytes"):
        await read_multipart_form(CONTENT_TYPE, sender.stream(), limits)
    assert sender.taken <= 21


async def test_plain_fields_count_toward_the_body() -> None:
    limits = UploadLimits(max_file_bytes=10, max_files=1, max_total_bytes=50_000)
    body = _body(_part("notes", b"n" * 20_000), _part("file", b"tiny", "a.md"))
    files = (await read_multipart_form(CONTENT_TYPE, Sender(body).stream(), limits)).files
    assert files == [UploadedFile("a.md", None, b"tiny")]
    with pytest.raises(UploadTooLarge):
        await read_multipart_form(
            CONTENT_TYPE, Sender(_part("notes", b"n" * 60_000)).stream(), limits
        )


@pytest.mark.parametrize(
    ("content_type", "body", "message"),
    [
        ("multipart/form-data", _body(_part("file", b"a", "a.txt")), "needs a boundary"),
        (CONTENT_TYPE, _part("file", b"cut short", "a.txt"), "ends before its closing boundary"),
        (CONTENT_TYPE, b"--wrong-boundary\r\n\r\n", "cannot be parsed"),
    ],
)
async def test_malformed_bodies_are_refused(content_type: str, body: bytes, message: str) -> None:
    with pytest.raises(MalformedUpload, match=message):
        await read_multipart_form(content_type, Sender(body).stream(), ROOMY)


async def test_plain_fields_are_read_as_text_up_to_their_own_limit() -> None:
    body = _body(_part("purpose", b"assistants"), _part("file", b"tiny", "a.md"))
    form = await read_multipart_form(CONTENT_TYPE, Sender(body).stream(), ROOMY)
    assert form.fields == {"purpose": "assistants"}
    assert form.files == [UploadedFile("a.md", None, b"tiny")]
    too_much = _body(_part("notes", b"n" * (MAX_FIELD_BYTES + 1)))
    with pytest.raises(UploadTooLarge, match="form fields"):
        await read_multipart_form(CONTENT_TYPE, Sender(too_much).stream(), ROOMY)
