"""Bounds on building a constraint: how big and how slow a schema's automata may get before the build gives up.

One request must never hold a worker (or the engine) for minutes: every build (schema → template → the token
automaton of each slot) runs under a :class:`CompileLimits` and raises :class:`~agentkit.errors.SchemaLimitError`
(a typed ``UnsupportedSchemaError`` naming the limit and the JSON pointer) when it would pass one. A build is also
*abandonable*: loops check a deadline and a cancel flag (:class:`Budget`), so a caller running it in a worker
thread can stop it (``cancel``) and the thread ends within one step (one slot's token index at most: that step is
native code, and :attr:`CompileLimits.max_slot_states` bounds it).

The active budget is a context variable: :func:`budget` installs one for the current thread/task, and deep code
(automata, number ranges, enums) reads it with :func:`current` without threading a parameter through every call.
"""

from __future__ import annotations

import contextlib
import contextvars
import math
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterator
from dataclasses import dataclass
from typing import Any

from ..errors import CompileCancelled, SchemaLimitError, UnsupportedSchemaError, UserError


@dataclass(frozen=True)
class CompileLimits:
    """Bounds on one constraint build (defaults in brackets).

    - ``max_seconds`` [10.0]: wall-clock time for the whole build, schema to token automaton. ``None``: no limit.
    - ``max_states`` [4000]: states of any automaton the compiler builds over characters (pattern intersections,
      ``not``, ``multipleOf``, the check of a slot).
    - ``max_slot_states`` [3000]: states of one slot's automaton over bytes (estimated before building: a state
      that leaves on non-ASCII characters counts 3) before its token index is built; the index costs about
      (byte states × vocabulary size), in native code that cannot be interrupted, so this bounds the longest step of
      a build (a ``maxLength: 256`` string, ~2,300, takes ~2-6 s on a 49k vocabulary on a loaded 2-core CPU).
    - ``max_regex_chars`` [200_000]: length of one slot's regex.
    - ``max_schema_depth`` [128]: nesting of the schema document (objects and arrays); deeper schemas are refused
      up front instead of exhausting Python's recursion limit.
    - ``max_enum`` [100_000]: members of one ``enum``.
    - ``max_branch_names`` [16_000]: branches x distinct property names of one ``anyOf`` / ``oneOf`` whose branches
      are objects (the compiler orders every branch's keys over all the names: its template grows with the
      product, and a 150-way ``anyOf`` of one-property objects exhausts the recursion limit after seconds);
      refused before compiling, with the pointer of the ``anyOf``.
    """

    max_seconds: float | None = 10.0
    max_states: int = 4000
    max_slot_states: int = 3000
    max_regex_chars: int = 200_000
    max_schema_depth: int = 128
    max_enum: int = 100_000
    max_branch_names: int = 16_000

    def __post_init__(self) -> None:
        if self.max_seconds is not None and not (isinstance(self.max_seconds, (int, float))
                                                 and math.isfinite(self.max_seconds) and self.max_seconds > 0):
            raise ValueError(f"CompileLimits.max_seconds must be a positive number or None, got {self.max_seconds!r}")
        for name in ("max_states", "max_slot_states", "max_regex_chars", "max_schema_depth", "max_enum",
                     "max_branch_names"):
            v = getattr(self, name)
            if not isinstance(v, int) or isinstance(v, bool) or v < 1:
                raise ValueError(f"CompileLimits.{name} must be an integer >= 1, got {v!r}")


DEFAULT_LIMITS = CompileLimits()

Cancel = Callable[[], bool] | Any  # a callable returning True to stop, or anything with ``is_set()`` (an Event)


class Budget:
    """One build's limits, deadline and cancel flag. ``where`` is the JSON pointer being built (for errors)."""

    __slots__ = ("_ticks", "cancel", "deadline", "limits", "where")

    def __init__(self, limits: CompileLimits | None = None, cancel: Cancel | None = None) -> None:
        self.limits = limits or DEFAULT_LIMITS
        s = self.limits.max_seconds
        self.deadline = None if s is None else time.monotonic() + s
        self.cancel = cancel
        self.where = "#"
        self._ticks = 0

    def check(self, where: str | None = None) -> None:
        """Raise if the deadline has passed or the caller cancelled (cheap: call it inside loops)."""
        if where is not None:
            self.where = where
        if self.cancel is not None and _cancelled(self.cancel):
            raise CompileCancelled(f"constraint build cancelled at {self.where}")
        if self.deadline is not None and time.monotonic() > self.deadline:
            # the pointer is the whole schema's: where the build had got to depends on the machine's load, and the
            # same schema must get the same error every time
            raise SchemaLimitError("max_seconds", "#", self.limits.max_seconds,
                                   "building the constraint took too long")

    def tick(self, every: int = 256) -> None:
        """:meth:`check` once every ``every`` calls (for the innermost loops)."""
        self._ticks += 1
        if self._ticks % every == 0:
            self.check()

    def fail(self, limit: str, detail: str = "", where: str | None = None) -> SchemaLimitError:
        """The error for passing ``limit`` (returned, for ``raise budget.fail(...)``)."""
        return SchemaLimitError(limit, where or self.where, getattr(self.limits, limit), detail)


def _cancelled(cancel: Cancel) -> bool:
    is_set = getattr(cancel, "is_set", None)
    return bool(is_set() if is_set is not None else cancel())


_NO_BUDGET = Budget(CompileLimits(max_seconds=None))
_CURRENT: contextvars.ContextVar[Budget | None] = contextvars.ContextVar("agentkit_compile_budget", default=None)


def current() -> Budget:
    """The budget of the build running in this context (an unlimited-time one with default sizes if none)."""
    b = _CURRENT.get()
    return _NO_BUDGET if b is None else b


@contextlib.contextmanager
def budget(limits: CompileLimits | None = None, cancel: Cancel | None = None) -> Iterator[Budget]:
    """Install a budget for the code inside the ``with``; a build nested in another keeps the outer one (its
    deadline already counts the inner build's time)."""
    outer = _CURRENT.get()
    if outer is not None and limits is None and cancel is None:
        yield outer
        return
    b = Budget(limits, cancel)
    if outer is not None and outer.deadline is not None and (b.deadline is None or outer.deadline < b.deadline):
        b.deadline = outer.deadline
    if outer is not None and b.cancel is None:
        b.cancel = outer.cancel
    token = _CURRENT.set(b)
    try:
        yield b
    finally:
        _CURRENT.reset(token)


# -- the schema document itself --------------------------------------------------------------------------------------
def preflight(schema: Any, limits: CompileLimits | None = None) -> None:
    """Refuse, before compiling, what would crash or stall a compiler walking the schema: nesting deeper than
    ``max_schema_depth``, numbers that are not finite (``1e999``, ``NaN``, ``Infinity``: not JSON), strings or keys
    holding lone surrogates (not encodable as UTF-8), and enums longer than ``max_enum``. Iterative: any depth.
    Errors name the keyword and the pointer of the subschema holding it."""
    lim = limits or DEFAULT_LIMITS
    stack: list[tuple[Any, str, str, int]] = [(schema, "#", "schema", 0)]  # (node, parent pointer, key, depth)
    while stack:
        node, parent, key, depth = stack.pop()
        ptr = parent if depth == 0 else f"{parent}/{key}"
        if isinstance(node, float):
            if not math.isfinite(node):
                raise UnsupportedSchemaError(_kw(key), _safe(parent), f"{node!r} is not a finite JSON number")
        elif isinstance(node, str):
            _check_text(node, _kw(key), parent)
        elif isinstance(node, (dict, list)):
            if depth >= lim.max_schema_depth:
                raise SchemaLimitError("max_schema_depth", _safe(ptr), lim.max_schema_depth,
                                       "schema nested too deeply")
            if isinstance(node, dict):
                enum = node.get("enum")
                if isinstance(enum, list) and len(enum) > lim.max_enum:
                    raise SchemaLimitError("max_enum", _safe(ptr), lim.max_enum, f"enum of {len(enum)} members")
                _check_branches(node, ptr, lim)
                for k, v in node.items():
                    if isinstance(k, str):
                        _check_text(k, "property name", ptr)
                    stack.append((v, ptr, _esc(str(k)), depth + 1))
            else:
                stack.extend((v, ptr, str(i), depth + 1) for i, v in enumerate(node))


def _check_branches(node: dict, ptr: str, lim: CompileLimits) -> None:
    """``max_branch_names`` for the ``anyOf`` / ``oneOf`` lists of ``node``."""
    for kw in ("anyOf", "oneOf"):
        branches = node.get(kw)
        if not isinstance(branches, list) or len(branches) < 2:
            continue
        names: set[str] = set()
        for b in branches:
            props = b.get("properties") if isinstance(b, dict) else None
            if isinstance(props, dict):
                names.update(k for k in props if isinstance(k, str))
        if len(branches) * len(names) > lim.max_branch_names:
            raise SchemaLimitError("max_branch_names", _safe(f"{ptr}/{kw}"), lim.max_branch_names,
                                   f"{len(branches)} branches x {len(names)} property names")


def _kw(key: str) -> str:
    return key if not key.isdigit() else "item"


def _check_text(s: str, keyword: str, ptr: str) -> None:
    try:
        s.encode("utf-8")
    except UnicodeEncodeError as e:
        raise UnsupportedSchemaError(_safe(keyword), _safe(ptr),
                                     f"lone surrogate U+{ord(s[e.start]):04X} at character {e.start}: text that "
                                     "is not encodable as UTF-8") from None


def _safe(ptr: str) -> str:
    return ptr.encode("utf-8", "backslashreplace").decode("utf-8")


def _esc(k: str) -> str:
    return k.replace("~", "~0").replace("/", "~1")


# -- remembered failures ---------------------------------------------------------------------------------------------
class FailureCache:
    """The latest failures of a cached build, so that asking again for a schema that failed fails at once instead
    of building again. A time-out (``max_seconds``: it depends on the machine's load) is remembered ``ttl_s``
    seconds; other failures until ``size`` newer ones push them out. A cancelled build is never remembered."""

    def __init__(self, size: int = 256, ttl_s: float = 60.0) -> None:
        self.size, self.ttl_s = size, ttl_s
        self._items: OrderedDict[Hashable, tuple[Exception, float | None]] = OrderedDict()
        self._lock = threading.Lock()

    def call(self, fn: Callable[..., Any], args: tuple) -> Any:
        """``fn(*args)``, or the failure it raised last time for ``args``."""
        with self._lock:
            hit = self._items.get(args)
        if hit is not None:
            exc, expires = hit
            if expires is None or time.monotonic() < expires:
                raise exc.with_traceback(None)
        try:
            return fn(*args)
        except UserError as e:
            timed = isinstance(e, SchemaLimitError) and e.limit == "max_seconds"
            with self._lock:
                self._items[args] = (e, time.monotonic() + self.ttl_s if timed else None)
                while len(self._items) > self.size:
                    self._items.popitem(last=False)
            raise
