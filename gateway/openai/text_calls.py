"""Tool calls a model wrote as plain JSON text instead of in its call syntax.

Small models asked to call tools often answer with the call as a JSON object, fenced in
```` ```json ```` or bare, rather than inside the ``<tool_call>`` tags their template taught
(Qwen2.5 0.5B does so for most BFCL questions); the parser then finds no call and the client
gets text. Read strictly, so that prose never becomes a call: the whole answer must be that JSON
(one object, or an array of them), each naming a tool the request offered, with arguments that
its parameters schema accepts. Measured on BFCL in docs/benchmarks.md, "Tool catalogs".
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from jsonschema.validators import validator_for

from gateway.openai.tool_types import ToolSpec

_FENCE = re.compile(r"^```(?:json)?\s*\n(.*)\n```$", re.DOTALL)


def calls_in_text(text: str, tools: Sequence[ToolSpec]) -> list[tuple[str, str]]:
    """``(name, arguments JSON)`` of the calls ``text`` consists of; empty when it is anything
    else (prose around the JSON, an unknown tool, arguments the schema rejects)."""
    body = text.strip()
    fenced = _FENCE.match(body)
    if fenced:
        body = fenced.group(1).strip()
    if not body.startswith(("{", "[")):
        return []
    try:
        written = json.loads(body)
    except json.JSONDecodeError:
        return []
    items = written if isinstance(written, list) else [written]
    schemas = {tool.function.name: tool.function.parameters or {} for tool in tools}
    calls = []
    for item in items:
        call = _call(item, schemas)
        if call is None:
            return []
        calls.append(call)
    return calls


def _call(item: Any, schemas: dict[str, dict[str, Any]]) -> tuple[str, str] | None:
    if not isinstance(item, dict) or set(item) - {"name", "arguments", "parameters"}:
        return None
    name, arguments = item.get("name"), item.get("arguments", item.get("parameters", {}))
    if name not in schemas or not isinstance(arguments, dict):
        return None
    schema = schemas[name]
    if not validator_for(schema)(schema).is_valid(arguments):
        return None
    return name, json.dumps(arguments, ensure_ascii=False)
