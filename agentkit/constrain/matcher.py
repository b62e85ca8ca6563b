"""Membership in a compiled JSON template by walking the tree (no giant regex).

:meth:`Template.matches` compiles the whole template into one Python regex. A template is a DAG (optional
properties share their tails, free-form values share their subtrees), and a regex cannot share: for large schemas
the regex runs to megabytes and Python takes seconds to compile it. :func:`tree_matches` decides the same language
with a memoised walk over ``(node, position)``; slot regexes are matched one at a time.

Slots in compiled JSON templates are always followed by a structural character (``"`` after a string body or key,
``,`` ``]`` ``}`` or the end after a number), so a slot's candidate ends are those positions only. Pass
``any_end=True`` for templates whose slots may end anywhere (slower).
"""

from __future__ import annotations

import re
from functools import lru_cache

from .nodes import Choice, Lit, Node, Repeat, Seq, Slot, Template

_BOUNDARY = frozenset('",:]}')


@lru_cache(maxsize=8192)
def _slot_re(regex: str) -> re.Pattern[str]:
    return re.compile(regex, re.DOTALL)


class _Walker:
    def __init__(self, text: str, any_end: bool) -> None:
        self.text = text
        n = len(text)
        self.cands = list(range(n + 1)) if any_end else [j for j in range(n) if text[j] in _BOUNDARY] + [n]
        self.memo: dict[tuple[int, int], frozenset[int]] = {}
        self.keep: list[Node] = []

    def ends(self, node: Node, i: int) -> frozenset[int]:
        key = (id(node), i)
        hit = self.memo.get(key)
        if hit is not None:
            return hit
        self.keep.append(node)
        self.memo[key] = frozenset()  # guards against (impossible) cycles
        if isinstance(node, Lit):
            out = frozenset((i + len(node.text),)) if self.text.startswith(node.text, i) else frozenset()
        elif isinstance(node, Slot):
            rx = _slot_re(node.regex)
            out = frozenset(j for j in self.cands if j >= i and rx.fullmatch(self.text, i, j))
        elif isinstance(node, Seq):
            cur = {i}
            for it in node.items:
                nxt: set[int] = set()
                for p in cur:
                    nxt |= self.ends(it, p)
                cur = nxt
                if not cur:
                    break
            out = frozenset(cur)
        elif isinstance(node, Choice):
            acc: set[int] = set()
            for o in node.options:
                acc |= self.ends(o, i)
            out = frozenset(acc)
        elif isinstance(node, Repeat):
            out = self._repeat(node, i)
        else:
            raise TypeError(f"not a template node: {node!r}")
        self.memo[key] = out
        return out

    def _repeat(self, node: Repeat, i: int) -> frozenset[int]:
        lo, hi = node.min, node.max
        if hi == 0:
            return frozenset((i,))
        res: set[int] = {i} if lo == 0 else set()
        sep = Lit(node.sep)
        self.keep.append(sep)
        frontier = set(self.ends(node.item, i))
        count = 1
        seen: set[tuple[int, int]] = set()
        while frontier:
            cap = min(count, lo) if hi is None else count
            frontier = {p for p in frontier if (cap, p) not in seen}
            seen |= {(cap, p) for p in frontier}
            if count >= lo:
                res |= frontier
            if hi is not None and count >= hi:
                break
            nxt: set[int] = set()
            for p in frontier:
                for q in self.ends(sep, p):
                    nxt |= self.ends(node.item, q)
            frontier = nxt
            count += 1
        return frozenset(res)


def tree_matches(template: Template | Node, text: str, *, any_end: bool = False) -> bool:
    """Whether ``text`` is in the template's language (same answer as :meth:`Template.matches`)."""
    root = template.root if isinstance(template, Template) else template
    return len(text) in _Walker(text, any_end).ends(root, 0)
