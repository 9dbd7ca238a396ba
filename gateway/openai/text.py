"""Request text a tokenizer can encode: JSON's ``\\ud800`` escapes decode to lone surrogates,
which no tokenizer can encode, so such text is refused naming where it is."""

from __future__ import annotations

from typing import Annotated

from pydantic import AfterValidator
from pydantic_core import PydanticCustomError

from gateway.http.errors import LONE_SURROGATE


def _valid_unicode(text: str) -> str:
    """JSON's ``\\ud800`` escapes decode to lone surrogates, which no tokenizer can encode."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise PydanticCustomError(
            LONE_SURROGATE,
            "text must be valid Unicode; it contains a lone surrogate at position {position}",
            {"position": exc.start},
        ) from None
    return text


Text = Annotated[str, AfterValidator(_valid_unicode)]
