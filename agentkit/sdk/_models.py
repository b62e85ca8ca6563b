"""Fake generators for testing agents without a model: ``TestModel`` and ``FunctionModel``.

Their stats are synthetic but shaped like the engine's: one token per UTF-8 byte; under a template the bytes of
JSON scalar values are slot tokens and the rest pinned; AR costs a forward per predicted token, diffusion a few
denoiser passes and one commit per canvas block (its drafts shown, ``on_draft``), verify one checking pass per
:data:`VERIFY_RUN` tokens, which it commits together (its drafts are not shown: verify's output is AR's).
"""

from __future__ import annotations

import inspect
import json
import math
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from ..config import DecodeConfig
from ..constrain.nodes import Template
from ..engine.stats import DecodeStats, GenerationResult
from ..steps.kinds import FINAL_ANSWER, compact
from ._generator import OnDraft, OnTokens

_DENOISE_STEPS_PER_BLOCK = 4
VERIFY_RUN = 4  # tokens a fake verify pass commits: its own first token and three kept drafts


@dataclass
class StepInfo:
    """What ``FunctionModel``'s function is told about the step being generated."""

    step: str  # plan | tool_call | extract | reply (or "structured" for a template the SDK did not label)
    mode: str
    config: DecodeConfig
    template: Template | None
    tools: dict[str, dict[str, Any]] = field(default_factory=dict)  # tool name -> parameters schema

    @property
    def schema(self) -> Any:
        return None if self.template is None else self.template.schema


class _Fake:
    ms_per_forward: float = 0.0

    def decode(self, token_ids: list[int]) -> str:
        return bytes(t for t in token_ids if 0 <= t < 256).decode("utf-8", errors="replace")

    def _result(self, text: str, value: Any, messages: list[dict[str, str]], config: DecodeConfig,
                template: Template | None, on_draft: OnDraft | None,
                on_tokens: OnTokens | None = None) -> GenerationResult:
        ids = list(text.encode("utf-8"))
        stats = synthetic_stats(len(ids), messages, config, template, value, self.ms_per_forward)
        drafts: list[list[int]] = []
        if config.mode == "diffusion" and ids:
            half = len(ids) // 2
            for fixed in ([True] * half + [False] * (len(ids) - half), [True] * len(ids)):
                drafts.append(ids)
                if on_draft is not None:
                    on_draft(ids, fixed)
        if on_tokens is not None:  # committed as the engine would: a token at a time in AR, per pass in verify,
            step = {"ar": 1, "verify": VERIFY_RUN}.get(config.mode, config.canvas_length)  # per canvas in diffusion
            for i in range(0, len(ids), step):
                on_tokens(ids[i:i + step])
        return GenerationResult(text, ids, stats, value if template is not None else None, drafts)


class TestModel(_Fake):
    """Calls every tool once (in order, or those in ``call_tools``) with arguments generated from its schema,
    then chooses ``final_answer``; structured steps get a value generated from their schema (or ``output_value``
    for the extract step), replies ``output_text`` or the tool results as JSON. Deterministic, stateless.
    """

    __test__ = False  # not a pytest class

    def __init__(self, *, call_tools: list[str] | str = "all", output_text: str | None = None,
                 output_value: Any = None, ms_per_forward: float = 0.0) -> None:
        self.call_tools = call_tools
        self.output_text = output_text
        self.output_value = output_value
        self.ms_per_forward = ms_per_forward

    async def generate(self, messages: list[dict[str, str]], config: DecodeConfig, template: Template | None = None,
                       on_draft: OnDraft | None = None, on_tokens: OnTokens | None = None) -> GenerationResult:
        step = _step_of(template)
        if step == "reply":
            return self._result(self._reply_text(messages), None, messages, config, template, on_draft, on_tokens)
        if step == "tool_call":
            value = self._next_call(messages, _tools_of(template))
        elif step == "extract" and self.output_value is not None:
            value = self.output_value
        else:
            value = example_value(template.schema if template is not None else {})
        return self._result(compact(value), value, messages, config, template, on_draft, on_tokens)

    def _next_call(self, messages: list[dict[str, str]], tools: dict[str, dict[str, Any]]) -> dict[str, Any]:
        called = {c.get("name", c.get("tool")) for c in _calls(messages)}
        wanted = list(tools) if self.call_tools == "all" else [t for t in self.call_tools if t in tools]
        for name in wanted:
            if name not in called:
                return {"name": name, "arguments": example_value(tools[name])}
        return {"name": FINAL_ANSWER, "arguments": {}}

    def _reply_text(self, messages: list[dict[str, str]]) -> str:
        if self.output_text is not None:
            return self.output_text
        results = {}
        for m in messages:
            if m["role"] == "user" and m["content"].startswith("Tool ") and " returned: " in m["content"]:
                head, _, body = m["content"].partition(" returned: ")
                results[head[len("Tool "):]] = body
            elif m["role"] == "user":  # the answer step's restated results (``_steps.results_text``)
                for found in _RESULT_LINE.finditer(m["content"]):
                    results[found.group(1)] = found.group(2)
        return compact(results) if results else "success (no tool calls)"


_RESULT_LINE = re.compile(r"^(?:- |.*: )?(\w+)\(.*?\) returned (.*)$", re.MULTILINE)


class FunctionModel(_Fake):
    """A scripted model: ``fn(messages, info)`` (sync or async) returns the step's output.

    Return a ``str`` (the text; parsed as JSON under a template), a ``dict``/``list`` (a JSON value), or a whole
    ``GenerationResult``. ``info`` is a ``StepInfo`` (step kind, mode, config, template, tools).
    """

    def __init__(self, fn: Callable[[list[dict[str, str]], StepInfo], Any | Awaitable[Any]], *,
                 ms_per_forward: float = 0.0) -> None:
        self.fn = fn
        self.ms_per_forward = ms_per_forward
        self.calls: list[StepInfo] = []

    async def generate(self, messages: list[dict[str, str]], config: DecodeConfig, template: Template | None = None,
                       on_draft: OnDraft | None = None, on_tokens: OnTokens | None = None) -> GenerationResult:
        info = StepInfo(_step_of(template), config.mode, config, template, _tools_of(template))
        self.calls.append(info)
        out = self.fn([dict(m) for m in messages], info)
        if inspect.isawaitable(out):
            out = await out
        if isinstance(out, GenerationResult):
            return out
        if isinstance(out, str):
            text, value = out, None
            if template is not None:
                try:
                    value = json.loads(out)
                except json.JSONDecodeError:
                    value = None
        else:
            text, value = compact(out), out
        return self._result(text, value, messages, config, template, on_draft, on_tokens)


def synthetic_stats(n: int, messages: list[dict[str, str]], config: DecodeConfig, template: Template | None,
                    value: Any, ms_per_forward: float = 0.0) -> DecodeStats:
    prompt = sum(len(m["content"].encode("utf-8")) for m in messages)
    slot = min(_scalar_bytes(value), n) if template is not None and value is not None else n
    pinned = n - slot
    blocks = math.ceil(n / config.canvas_length) if n else 0
    if config.mode == "ar":
        encoder, decoder = 1 + slot + (1 if pinned else 0), 0  # pinned runs jump forward in one step
    elif config.mode == "diffusion":
        encoder, decoder = 1 + blocks, blocks * _DENOISE_STEPS_PER_BLOCK
    else:  # verify
        encoder, decoder = 1 + math.ceil(n / VERIFY_RUN), 0
    ms = ms_per_forward
    checks = encoder - 1 if config.mode == "verify" else 0
    stats = DecodeStats(mode=config.mode, prompt_tokens=prompt, output_tokens=n, pinned_tokens=pinned,
                        slot_tokens=slot, encoder_forwards=encoder, decoder_forwards=decoder, blocks=blocks,
                        verify_forwards=checks, accepted_slot_tokens=max(0, slot - checks) if checks else 0,
                        steps_per_block=[_DENOISE_STEPS_PER_BLOCK] * (blocks if config.mode == "diffusion" else 0),
                        prefill_ms=ms, denoise_ms=decoder * ms, commit_ms=(encoder - 1) * ms,
                        finish_reason="template" if template is not None else "stop")
    stats.latency_ms = stats.prefill_ms + stats.denoise_ms + stats.commit_ms
    return stats


def example_value(schema: dict[str, Any], root: dict[str, Any] | None = None, depth: int = 0) -> Any:
    """A small deterministic value valid for common JSON Schemas (default, first enum member, minimum, ...)."""
    root = root if root is not None else schema
    if depth > 8 or not isinstance(schema, dict):
        return None
    if "$ref" in schema:
        target: Any = root
        for part in schema["$ref"].lstrip("#/").split("/"):
            target = target.get(part, {}) if part else target
        return example_value(target, root, depth + 1)
    if "const" in schema:
        return schema["const"]
    if "default" in schema:
        return schema["default"]
    if schema.get("enum"):
        return schema["enum"][0]
    for key in ("anyOf", "oneOf"):
        if key in schema:
            options = [o for o in schema[key] if o.get("type") != "null"] or schema[key]
            return example_value(options[0], root, depth + 1)
    if "allOf" in schema:
        return example_value({k: v for s in schema["allOf"] for k, v in s.items()}, root, depth + 1)
    kind = schema.get("type", "object" if "properties" in schema else "string")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "null")
    if kind == "object":
        return {k: example_value(v, root, depth + 1) for k, v in schema.get("properties", {}).items()}
    if kind == "array":
        prefix = [example_value(s, root, depth + 1) for s in schema.get("prefixItems", [])]
        count = max(schema.get("minItems", 1) - len(prefix), 0) if schema.get("maxItems", 1) > len(prefix) else 0
        return prefix + [example_value(schema.get("items", {}), root, depth + 1) for _ in range(count)]
    if kind in ("integer", "number"):
        lo = schema.get("minimum", schema.get("exclusiveMinimum", -1) + 1)
        return int(lo) if kind == "integer" else float(lo)
    if kind == "boolean":
        return False
    if kind == "null":
        return None
    formats = {"date": "2024-01-01", "date-time": "2024-01-01T00:00:00Z", "time": "00:00:00",
               "email": "a@example.com", "uuid": "00000000-0000-0000-0000-000000000000",
               "uri": "https://example.com", "ipv4": "127.0.0.1"}
    if schema.get("format") in formats:
        return formats[schema["format"]]
    return "a" * max(schema.get("minLength", 1), 1)


def _step_of(template: Template | None) -> str:
    if template is None:
        return "reply"
    return str(template.meta.get("step", "structured"))


def _tools_of(template: Template | None) -> dict[str, dict[str, Any]]:
    if template is None:
        return {}
    tools = dict(template.meta.get("tools", {}))
    return tools


def _calls(messages: list[dict[str, str]]) -> list[dict[str, Any]]:
    calls = []
    for m in messages:
        if m["role"] != "assistant":
            continue
        try:
            v = json.loads(m["content"])
        except json.JSONDecodeError:
            continue
        if isinstance(v, dict) and ("name" in v or "tool" in v):
            calls.append(v)
    return calls


def _scalar_bytes(value: Any) -> int:
    if isinstance(value, dict):
        return sum(_scalar_bytes(v) for v in value.values())
    if isinstance(value, list):
        return sum(_scalar_bytes(v) for v in value)
    return len(compact(value).encode("utf-8"))
