"""The server's tool-call format: how tools are described to the model, the template a forced call decodes
under, and how a free-text reply is read back as a call.

The call is ``{"name":"NAME","arguments":<parameters>}``; with several tools the shared prefix
``{"name":"`` is pinned once and the name is a choice, then each tool's arguments are compiled.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from agentkit.constrain.nodes import Choice, Lit, Template, seq

from .protocol import ToolDef

_TOOL_PROMPT = (
    "You can call these tools. To call one, reply with only a JSON object "
    '{{"name": "<tool name>", "arguments": {{...}}}}.\n{tools}'
)
EMPTY_PARAMETERS: dict[str, Any] = {"type": "object", "properties": {}}


def describe_tools(tools: list[ToolDef]) -> str:
    """The system-message text listing the tools and the call format."""
    desc = "\n".join(json.dumps({"name": t.function.name, "description": t.function.description or "",
                                 "parameters": t.function.parameters or EMPTY_PARAMETERS}) for t in tools)
    return _TOOL_PROMPT.format(tools=desc)


def tool_call_template(tools: list[ToolDef], compile_parameters: Callable[[dict[str, Any], str], Template]
                       ) -> Template:
    """The template of one call to any of ``tools``: the common prefix pinned, the name a choice, each tool's
    arguments compiled with ``compile_parameters(schema, where)``."""
    options = []
    for i, tool in enumerate(tools):
        sub = compile_parameters(tool.function.parameters or EMPTY_PARAMETERS, f"tools[{i}].function.parameters")
        options.append(seq(Lit(json.dumps(tool.function.name) + ',"arguments":'), sub.root, Lit("}")))
    body = options[0] if len(options) == 1 else Choice(tuple(options))
    return Template(seq(Lit('{"name":'), body), schema={"tool_call": [t.function.name for t in tools]}, kind="json",
                    meta={"step": "tool_call"})


def parse_tool_call(text: str, names: frozenset[str] | set[str]) -> dict[str, Any] | None:
    """``{"name", "arguments"}`` if ``text`` is (starts with) a JSON call of one of ``names``, else None."""
    s = text.strip()
    if not s.startswith("{"):
        return None
    try:
        v, _ = json.JSONDecoder().raw_decode(s)
    except json.JSONDecodeError:
        return None
    if isinstance(v, dict) and v.get("name") in names and isinstance(v.get("arguments", {}), dict):
        return {"name": v["name"], "arguments": v.get("arguments", {})}
    return None
