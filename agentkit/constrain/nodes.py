"""The canvas template: what a structured output looks like before any token is chosen.

A template is a small tree. ``Lit`` text is pinned (placed in the canvas, never predicted); ``Slot`` is a value the
model fills under a regex; ``Choice`` and ``Repeat`` are real decisions the model makes (optional properties,
enum members, anyOf branches, array lengths). Every node has an exact character-level language, given by
``to_regex`` (Python ``re`` syntax restricted to what outlines-core also accepts: no lookaround, no backrefs).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from functools import cached_property

from .fences import Fence
from .limits import current

DEFAULT_SLOT_TOKENS = 48


@dataclass(frozen=True)
class Lit:
    """Pinned text."""

    text: str

    def to_regex(self) -> str:
        return re.escape(self.text)


@dataclass(frozen=True)
class Slot:
    """A value the model writes, constrained to ``regex`` (the value's own text, e.g. a JSON string with quotes).

    ``source``: a text the value must be a span of (the JSON-escaped text of a grounded extraction,
    :mod:`agentkit.constrain.ground`); the token automaton is then the text's substring automaton intersected with
    ``regex``'s (:class:`~agentkit.constrain.spans.SpanDFA`). ``exclude``: values (JSON string bodies) the slot may
    not end as (a field's name, a stock placeholder; :class:`~agentkit.constrain.spans.ExcludeDFA`). ``fence``:
    where in ``source`` the span may start, end and reach (:class:`~agentkit.constrain.fences.Fence`). ``to_regex``
    stays ``regex``'s language, a superset of all three."""

    regex: str
    max_tokens: int = DEFAULT_SLOT_TOKENS
    name: str = ""  # JSON pointer of the value, for traces and errors
    source: str | None = None
    exclude: tuple[str, ...] = ()
    fence: Fence | None = None

    def to_regex(self) -> str:
        return f"(?:{self.regex})"


@dataclass(frozen=True)
class Seq:
    items: tuple[Node, ...]

    def to_regex(self) -> str:
        return "".join(i.to_regex() for i in self.items)


@dataclass(frozen=True)
class Choice:
    """One of ``options``; ``Lit("")`` is the empty option (an omitted optional property)."""

    options: tuple[Node, ...]

    def to_regex(self) -> str:
        return "(?:" + "|".join(o.to_regex() for o in self.options) + ")"


@dataclass(frozen=True)
class Repeat:
    """``item`` repeated ``min``..``max`` times, joined by ``sep`` (``max=None``: unbounded)."""

    item: Node
    sep: str
    min: int = 0
    max: int | None = None

    def to_regex(self) -> str:
        item, sep = self.item.to_regex(), re.escape(self.sep)
        hi = "" if self.max is None else str(self.max - 1)
        if self.min == 0:
            if self.max == 0:
                return ""
            return f"(?:{item}(?:{sep}{item}){{0,{hi}}})?"
        return f"{item}(?:{sep}{item}){{{self.min - 1},{hi}}}"


Node = Lit | Slot | Seq | Choice | Repeat


@dataclass
class Template:
    """A compiled template: the tree plus where it came from and what compiling it cost."""

    root: Node
    schema: object = None
    compile_ms: float = 0.0
    kind: str = "json"  # json | jsonl (JSON values one per line: json_lines) | edit | regex
    meta: dict = field(default_factory=dict)

    @cached_property
    def regex(self) -> str:
        return self.root.to_regex()

    @cached_property
    def _compiled(self) -> re.Pattern[str]:
        return re.compile(self.regex, re.DOTALL)

    def matches(self, text: str) -> bool:
        """Whether ``text`` is in the template's language (character level)."""
        return self._compiled.fullmatch(text) is not None


def seq(*items: Node) -> Node:
    """Build a Seq, merging adjacent literals and flattening nested Seqs."""
    out: list[Node] = []
    for it in items:
        parts = it.items if isinstance(it, Seq) else (it,)
        for p in parts:
            if isinstance(p, Lit):
                if not p.text:
                    continue
                if out and isinstance(out[-1], Lit):
                    out[-1] = Lit(out[-1].text + p.text)
                    continue
            out.append(p)
    if len(out) == 1:
        return out[0]
    return Seq(tuple(out)) if out else Lit("")


def choice(opts: list) -> Node | None:
    """A Choice of the distinct options (None when there are none). Linear in the options: literals (enum members,
    the bulk of large choices) are compared by text through a set; other nodes by equality among themselves."""
    out: list = []
    texts: set[str] = set()
    others: list = []
    budget = current()
    for o in opts:
        budget.tick(1024)
        if o is None:
            continue
        if isinstance(o, Lit):
            if o.text in texts:
                continue
            texts.add(o.text)
        elif any(o is x or o == x for x in others):
            continue
        else:
            others.append(o)
        out.append(o)
    if len(texts) >= TRIE_MIN:  # a big enum: shared prefixes factored out, so a decoding state holds few threads
        lits = [o.text for o in out if isinstance(o, Lit)]
        out = [o for o in out if not isinstance(o, Lit)] + [lit_trie(lits)]
    return None if not out else out[0] if len(out) == 1 else Choice(tuple(out))


TRIE_MIN = 32  # literal options from which a choice is factored into a trie (below: one thread each is cheap)
_TRIE_DEPTH = 64  # nested branch points at most; deeper groups stay flat choices (no recursion limit on input)


def lit_trie(texts: list[str], depth: int = 0) -> Node:
    """The choice among the distinct ``texts`` as a trie: their common prefix once, then a choice per next
    character. Same language as ``Choice(Lit(t) for t in texts)``, but the token automaton's state inside a
    shared prefix is one thread instead of one per member: a 5,000-member enum whose members share 100
    characters costs masks over at most one branch point's children, not 5,000 literals, at every step."""
    if len(texts) == 1:
        return Lit(texts[0])
    p = os.path.commonprefix(texts)
    rest = [t[len(p):] for t in texts]
    if depth >= _TRIE_DEPTH or len(texts) < 4:
        opts: list[Node] = [Lit(r) for r in rest]
    else:
        current().tick(64)
        groups: dict[str, list[str]] = {}
        for r in rest:
            groups.setdefault(r[:1], []).append(r)
        opts = [Lit("") if k == "" else lit_trie(g, depth + 1) for k, g in groups.items()]
    node = opts[0] if len(opts) == 1 else Choice(tuple(opts))
    return node if not p else seq(Lit(p), node)


def json_lines(text: str) -> list:
    """The JSON values of a ``"jsonl"`` template's output, in order (whitespace between them skipped)."""
    import json

    dec, out, i = json.JSONDecoder(), [], 0
    while True:
        while i < len(text) and text[i].isspace():
            i += 1
        if i >= len(text):
            return out
        value, i = dec.raw_decode(text, i)
        out.append(value)


def slots(root: Node) -> list[Slot]:
    """Every distinct Slot in the template (the tree may be a DAG: each node is visited once)."""
    out, seen, stack = [], set(), [root]
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        if isinstance(node, Slot):
            out.append(node)
        elif isinstance(node, Seq):
            stack.extend(node.items)
        elif isinstance(node, Choice):
            stack.extend(node.options)
        elif isinstance(node, Repeat):
            stack.append(node.item)
    return out
