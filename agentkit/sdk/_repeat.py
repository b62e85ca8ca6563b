"""What the agent does when the model calls again a tool that already answered.

A small model that has a tool's result in view tends to call the same tool again (often with the same arguments,
or with the result fed back in as an argument) instead of answering. Nothing in the conversation stops it, so a
run repeats the call until ``max_iterations``. ``Agent(on_repeat=..., repeat=...)`` decides:

- ``repeat="call"``: a *repeat* is a call identical (same tool, same arguments) to one that already returned a
  result in this run; ``repeat="feedback"`` (the default): that, or a call that passes one of the tool's own
  earlier results back to it as an argument (``convert(value=37.78, ...)`` after ``convert`` returned ``37.78``:
  the pattern a small model falls into, converting its answer again and again); ``repeat="tool"``: any call of a
  tool that already returned a result (its first result stands). Only the results since the last result of
  another tool count (after ``apply_edits``, ``run_tests`` with the same arguments is a new question). A call that
  failed is never a repeat: calling again after an error is how the model retries.
- ``on_repeat="answer"`` (the default): the repeat is not executed; the run goes to its answer step with the
  earlier results in view. ``"retry"``: the repeat is not executed; the model is told that it already has that
  result and asked again (a second repeat in a row then answers). ``"allow"``: the repeat is executed like any
  call (the loop then ends only by ``final_answer`` or the limits).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Literal

from ..errors import UserError
from ..toolcall import call_key

OnRepeat = Literal["answer", "retry", "allow"]
RepeatKey = Literal["call", "feedback", "tool"]
ON_REPEAT: tuple[str, ...] = ("answer", "retry", "allow")
REPEAT_KEYS: tuple[str, ...] = ("call", "feedback", "tool")


def check(on_repeat: Any, repeat: Any) -> None:
    if on_repeat not in ON_REPEAT:
        raise UserError(f"on_repeat must be one of {ON_REPEAT}, got {on_repeat!r}")
    if repeat not in REPEAT_KEYS:
        raise UserError(f"repeat must be one of {REPEAT_KEYS}, got {repeat!r}")


@dataclass
class Results:
    """The results of the calls that succeeded in a run, in order; and how many repeats came in a row."""

    calls: dict[str, tuple[str, Any, str]] = field(default_factory=dict)  # call key -> (tool, args, result text)
    recent: dict[str, tuple[str, Any, str]] = field(default_factory=dict)  # the same, since another tool's result
    in_a_row: int = 0

    def add(self, tool: str, args: Any, text: str) -> None:
        if any(c[0] != tool for c in self.recent.values()):
            self.recent.clear()  # another tool ran since (an edit before the tests run again): its state may differ
        self.calls[call_key(tool, args)] = self.recent[call_key(tool, args)] = (tool, args, text)
        self.in_a_row = 0

    def earlier(self, tool: str, args: Any, key: RepeatKey) -> tuple[str, Any, str] | None:
        """The earlier successful call that ``tool(args)`` repeats under ``key``, or None."""
        same = self.recent.get(call_key(tool, args))
        if same is not None or key == "call":
            return same
        mine = [c for c in reversed(self.recent.values()) if c[0] == tool]
        if key == "tool":
            return mine[0] if mine else None
        values = {_norm(v) for v in (args.values() if isinstance(args, dict) else [args])}
        return next((c for c in mine if _norm(c[2]) in values), None)

    def tools_done(self) -> tuple[str, ...]:
        """The tools that returned a result in this run, in order of their first result, the latest one last."""
        done = list(dict.fromkeys(c[0] for c in self.calls.values()))
        last = next(iter(self.recent.values()), None)  # ``recent`` holds the latest tool's calls only
        if last is not None:
            done.remove(last[0])
            done.append(last[0])
        return tuple(done)

    def __len__(self) -> int:
        return len(self.calls)


def _norm(value: Any) -> str:
    """A value as text for comparing an argument with a result (``37.780`` and ``"37.78"`` alike)."""
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True, default=str)
    text = text.strip().strip('"')
    try:
        return repr(float(text))
    except ValueError:
        return text


def retry_text(tool: str, result: str) -> str:
    return (f"You already called {tool} and it returned: {result}. Do not call it again: answer with "
            f"final_answer, or call a different tool.")
