"""Read a multipart/form-data upload as it streams in, refusing it the moment a limit is passed.

Starlette's `request.form()` spools every file whole (to memory, then disk) before anyone can look
at its size; here each file is held in memory only up to the per-file limit, the body only up to
the total limit, and the number of files is counted as their headers arrive. Parts without a
`filename` (plain form fields) are kept as text, up to `MAX_FIELD_BYTES` in all.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field

from python_multipart import MultipartParser
from python_multipart.exceptions import MultipartParseError
from python_multipart.multipart import parse_options_header

MAX_FIELD_BYTES = 64 * 1024


@dataclass(frozen=True)
class UploadLimits:
    max_file_bytes: int
    max_files: int
    max_total_bytes: int


@dataclass(frozen=True)
class UploadedFile:
    filename: str
    content_type: str | None
    data: bytes


@dataclass(frozen=True)
class UploadForm:
    files: list[UploadedFile]
    fields: dict[str, str] = field(default_factory=dict)


class UploadTooLarge(ValueError):
    """A file, the number of files or the whole body passed its limit (HTTP 413)."""


class MalformedUpload(ValueError):
    """The body is not well-formed multipart/form-data (HTTP 400)."""


async def read_multipart_form(
    content_type: str, body: AsyncIterator[bytes], limits: UploadLimits
) -> UploadForm:
    """The uploaded files, in order, and the plain fields of a multipart body; raises as soon as
    a limit is passed."""
    boundary = parse_options_header(content_type)[1].get(b"boundary")
    if not boundary:
        raise MalformedUpload("multipart/form-data needs a boundary in its Content-Type")
    collector = _FileCollector(limits)
    parser = MultipartParser(boundary, collector.callbacks())
    received = 0
    try:
        async for piece in body:
            received += len(piece)
            if received > limits.max_total_bytes:
                raise UploadTooLarge(
                    f"The upload is larger than the limit of {limits.max_total_bytes} bytes "
                    "for one request."
                )
            parser.write(piece)
        parser.finalize()
    except MultipartParseError as error:
        raise MalformedUpload(f"The multipart body cannot be parsed: {error}") from error
    if not collector.finished:
        raise MalformedUpload("The multipart body ends before its closing boundary.")
    return UploadForm(collector.files, collector.fields)


class _FileCollector:
    """Parser callbacks that keep each file's name, type and bytes, enforcing the limits."""

    def __init__(self, limits: UploadLimits) -> None:
        self.limits = limits
        self.files: list[UploadedFile] = []
        self.fields: dict[str, str] = {}
        self._field_name: str | None = None
        self._field_bytes = 0
        self.finished = False
        self._headers: dict[str, bytes] = {}
        self._field = bytearray()
        self._value = bytearray()
        self._filename: str | None = None
        self._data = bytearray()

    def callbacks(self) -> dict[str, object]:
        return {
            "on_part_begin": self._part_begin,
            "on_header_field": lambda data, start, end: self._field.extend(data[start:end]),
            "on_header_value": lambda data, start, end: self._value.extend(data[start:end]),
            "on_header_end": self._header_end,
            "on_headers_finished": self._headers_finished,
            "on_part_data": self._part_data,
            "on_part_end": self._part_end,
            "on_end": self._end,
        }

    def _part_begin(self) -> None:
        self._headers, self._filename, self._field_name = {}, None, None
        self._data = bytearray()

    def _header_end(self) -> None:
        name = self._field.decode("latin-1").strip().lower()
        self._headers[name] = bytes(self._value).strip()
        self._field.clear()
        self._value.clear()

    def _headers_finished(self) -> None:
        disposition = parse_options_header(self._headers.get("content-disposition", b""))[1]
        raw_name = disposition.get(b"filename")
        if raw_name is None:
            self._field_name = disposition.get(b"name", b"").decode("utf-8", "replace")
            return
        self._filename = raw_name.decode("utf-8", "replace")
        if len(self.files) >= self.limits.max_files:
            raise UploadTooLarge(
                f"The upload has more than {self.limits.max_files} files; send them in "
                "several requests."
            )

    def _part_data(self, data: bytes, start: int, end: int) -> None:
        if self._filename is None:
            self._field_bytes += end - start
            if self._field_bytes > MAX_FIELD_BYTES:
                raise UploadTooLarge(f"The form fields pass the limit of {MAX_FIELD_BYTES} bytes.")
        self._data.extend(data[start:end])
        if self._filename is not None and len(self._data) > self.limits.max_file_bytes:
            raise UploadTooLarge(
                f"File '{self._filename}' is larger than the limit of "
                f"{self.limits.max_file_bytes} bytes."
            )

    def _part_end(self) -> None:
        if self._filename is not None:
            content_type = self._headers.get("content-type", b"").decode("latin-1") or None
            self.files.append(UploadedFile(self._filename, content_type, bytes(self._data)))
        elif self._field_name:
            self.fields[self._field_name] = self._data.decode("utf-8", "replace")
        self._filename, self._field_name, self._data = None, None, bytearray()

    def _end(self) -> None:
        self.finished = True
