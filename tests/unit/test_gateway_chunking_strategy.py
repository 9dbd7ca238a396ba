"""OpenAI's ``chunking_strategy`` checked as OpenAI defines it: auto is the server's default,
static within 100..4096 tokens, at most half of them overlapping; else a 400 naming the field."""

from typing import Any

import pytest

from gateway.http.errors import APIError
from gateway.openai.chunking_strategy import requested_chunking, strategy_object
from retriever.ingest.chunking import Chunking

DEFAULT = Chunking(384)


def static(size: Any, overlap: Any) -> dict[str, Any]:
    return {
        "type": "static",
        "static": {"max_chunk_size_tokens": size, "chunk_overlap_tokens": overlap},
    }


def test_auto_is_the_default_and_static_is_taken_as_given():
    assert requested_chunking(None, DEFAULT) is None
    assert requested_chunking({"type": "auto"}, DEFAULT) == DEFAULT
    assert requested_chunking(static(100, 50), DEFAULT) == Chunking(100, 50)
    assert requested_chunking(static(4096, 0), DEFAULT) == Chunking(4096, 0)
    assert strategy_object(Chunking(800, 400)) == static(800, 400)


@pytest.mark.parametrize(
    ("strategy", "param"),
    [
        ("auto", "chunking_strategy"),
        ({"type": "semantic"}, "chunking_strategy.type"),
        ({"type": "auto", "static": {}}, "chunking_strategy.static"),
        ({"type": "static"}, "chunking_strategy.static"),
        (static(99, 0), "chunking_strategy.static.max_chunk_size_tokens"),
        (static(4097, 0), "chunking_strategy.static.max_chunk_size_tokens"),
        (static(800.0, 0), "chunking_strategy.static.max_chunk_size_tokens"),
        (static(True, 0), "chunking_strategy.static.max_chunk_size_tokens"),
        (static(800, 401), "chunking_strategy.static.chunk_overlap_tokens"),
        (static(800, -1), "chunking_strategy.static.chunk_overlap_tokens"),
        (static(800, None), "chunking_strategy.static.chunk_overlap_tokens"),
        (
            {"type": "static", "static": {"max_chunk_size_tokens": 800, "overlap": 10}},
            "chunking_strategy.static.overlap",
        ),
    ],
)
def test_bad_strategies_are_a_400_naming_the_field(strategy: Any, param: str):
    with pytest.raises(APIError) as refused:
        requested_chunking(strategy, DEFAULT)
    assert (refused.value.status, refused.value.param) == (400, param)


def test_the_field_is_named_where_it_was_given():
    with pytest.raises(APIError) as refused:
        requested_chunking(static(10, 0), DEFAULT, "files.2.chunking_strategy")
    assert refused.value.param == "files.2.chunking_strategy.static.max_chunk_size_tokens"
