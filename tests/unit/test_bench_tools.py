"""The tools benchmark sends what the gateway accepts: dozens of distinct, valid function tools."""

from __future__ import annotations

from gateway.openai.tool_types import ToolSpec
from gateway.openai.tools import check_tools
from load_tests.bench_tools import tool_catalog


def test_a_catalog_of_dozens_of_tools_passes_the_gateways_checks() -> None:
    for count in (1, 40, 120):
        tools = [ToolSpec.model_validate(tool) for tool in tool_catalog(count)]
        assert len({tool.function.name for tool in tools}) == count
        check_tools(tools, [f"tools[{index}]" for index in range(count)])
