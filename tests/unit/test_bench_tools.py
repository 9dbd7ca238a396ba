"""The tools benchmark sends what the gateway accepts (dozens of distinct, valid function tools,
at Open WebUI's size too) and pairs each blended new session with its full prefill."""

from __future__ import annotations

import json

from gateway.openai.tool_types import ToolSpec
from gateway.openai.tools import check_tools
from load_tests.bench_tools import blend_speedup
from load_tests.tool_catalogs import front_end_catalog, tool_catalog


def test_a_catalog_of_dozens_of_tools_passes_the_gateways_checks() -> None:
    for count in (1, 40, 120):
        tools = [ToolSpec.model_validate(tool) for tool in tool_catalog(count)]
        assert len({tool.function.name for tool in tools}) == count
        check_tools(tools, [f"tools[{index}]" for index in range(count)])


def test_the_front_end_catalog_is_open_webuis_size_and_passes_the_checks() -> None:
    tools = [ToolSpec.model_validate(tool) for tool in front_end_catalog(3)]
    assert len(tools) == 28 and 21_000 < len(json.dumps(front_end_catalog(3))) < 27_000
    check_tools(tools, [f"tools[{index}]" for index in range(28)])
    assert front_end_catalog(3) != front_end_catalog(4)


def test_the_speedup_pairs_each_trials_blend_with_its_full_prefill() -> None:
    def trial(full_s: float, blended_s: float) -> dict:
        return {"new session, full prefill": {"seconds": full_s},
                "new session, blended": {"seconds": blended_s}}  # fmt: skip

    assert blend_speedup([trial(20, 2), trial(30, 2), trial(10, 5)]) == 10.0
