"""An agent's step templates (compiled once per step and JSON style, kept) and the reading of a tool step's calls
against the tools it offered."""

from __future__ import annotations

import time
from typing import Any

from ..constrain.nodes import Template
from ..steps import kinds as steps
from ..steps.arguments import ArgumentSources, grounded_parameters
from ..toolcall import call_key
from ._tools import Tool


class StepTemplates:
    """The templates of an agent's steps, by (step, JSON style), at most 64 (per-run output types: the oldest go
    first), over the agent's ``tools``."""

    def __init__(self, tools: list[Tool]) -> None:
        self.tools = tools
        self.cache: dict[tuple[str, str], Template] = {}

    def set_tools(self, tools: list[Tool]) -> None:
        """The agent's tools changed: the tool-call templates built for the old ones go."""
        self.tools = tools
        for key in [k for k in self.cache if k[0].startswith("tool_call")]:
            del self.cache[key]

    def template(self, step: str, style: str = steps.STYLE, output: steps.OutputSpec | None = None,
                  open_objects: bool = False, tools: list[Tool] | None = None) -> tuple[Template | None, float]:
        """The step's template (None for reply) in JSON ``style``, closed unless ``open_objects`` (``output``: the
        run's, for ``extract``; ``tools``: the tools a ``tool_call`` step offers, default all) and the ms spent
        compiling it now (0 once the agent has it)."""
        tools = self.tools if tools is None else tools
        if step == "reply":
            return None, 0.0
        flags = (style or "") + (":open" if open_objects else "")
        if step == "extract":
            assert output is not None
            key = ("extract:" + output.template_key(), flags)
        else:
            key = (step if tools is self.tools else step + ":" + ",".join(t.name for t in tools), flags)
        if key in self.cache:
            return self.cache[key], 0.0
        t0 = time.perf_counter()
        if step == "tool_call":
            template = steps.tool_call_template(tools, style, strict=not open_objects)
        else:
            compiled = steps.compile_template(steps.Plan.model_json_schema(), style, not open_objects) \
                if step == "plan" else output.template(style, not open_objects)  # type: ignore[union-attr]
            template = steps.for_step(compiled, step, open_objects=open_objects)
        self.cache[key] = template
        while len(self.cache) > 64:  # per-run output types: the oldest compiled templates go first
            del self.cache[next(iter(self.cache))]
        return template, (time.perf_counter() - t0) * 1000

    def call_template(self, tool: str, style: str | None, open_objects: bool = False, max_calls: int = 1,
                      sources: ArgumentSources | None = None) -> tuple[Template, float]:
        """The template of calls of ``tool`` only (its name pinned, its arguments decoded; one to ``max_calls``
        calls, one per line), in JSON ``style``, closed unless ``open_objects``, and the ms spent compiling it now.
        ``sources``: the arguments grounded in the conversation (:mod:`agentkit.steps.arguments`; built for each
        step)."""
        key = (f"tool_call:{tool}:{max_calls}", (style or "") + (":open" if open_objects else ""))
        if sources is None and key in self.cache:
            return self.cache[key], 0.0
        t0 = time.perf_counter()
        chosen = [t for t in self.tools if t.name == tool]
        params = None if sources is None else grounded_parameters(chosen, sources, style, not open_objects)
        template = steps.tool_call_template(chosen, style, final_answer=False, strict=not open_objects,
                                            max_calls=max_calls, parameters=params)
        if sources is None:
            self.cache[key] = template
        return template, (time.perf_counter() - t0) * 1000

    def parse_calls(self, value: Any, offered: list[Tool] | None = None) -> list[tuple[str, dict[str, Any]]]:
        """The step's calls: one call object, or the list a parallel-calls template gives (each checked against
        the ``offered`` tools, default all)."""
        values = value if isinstance(value, list) and value else [value]
        calls = {}
        for v in values:  # a call written twice in one reply is made once
            name, args = self.parse_call(v, offered)
            calls.setdefault(call_key(name, args), (name, args))
        return list(calls.values())

    def parse_call(self, value: Any, offered: list[Tool] | None = None) -> tuple[str, dict[str, Any]]:
        names = [t.name for t in (self.tools if offered is None else offered)] + [steps.FINAL_ANSWER]
        # the one call reader (agentkit.toolcall), held to the step's exact shape: no other keys, no aliases
        call = steps.read_tool_call(value)
        if call is None:
            raise steps.OutputError(f'expected {{"name": NAME, "arguments": {{...}}}}, got '
                                    f'{steps.compact(value)[:200]}')
        name, args = call
        if name not in names:
            raise steps.OutputError(f"unknown tool {name!r}; the tools are {names}")
        if not isinstance(args, dict):
            raise steps.OutputError(f"arguments must be a JSON object, got {steps.compact(args)[:200]}")
        if args and any(t.templated and t.name == name for t in self.tools):
            raise steps.OutputError(f"{name} takes no arguments in the call ({{}}); its input is written next")
        return name, args
