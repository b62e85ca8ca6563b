"""ECMA-262 patterns (as JSON Schema uses them) → a small regex AST over code points.

AST nodes are tuples: ``("set", intervals)``, ``("cat", items)``, ``("alt", items)``, ``("rep", node, lo, hi)``
(``hi`` None = unbounded), ``("eps",)``, ``("bol",)``, ``("eol",)``. Intervals are sorted disjoint ``(lo, hi)``
code-point ranges; ``("look", positive, node)`` is a lookahead (only supported right after ``^``, see
:mod:`agentkit.constrain.json_regex`). Unsupported features (backreferences, lookbehind, word boundaries, Unicode
properties, inline flags) raise :class:`PatternError`. What a pattern means over whole strings, and its translation
into a regex over JSON-escaped text, live in :mod:`agentkit.constrain.json_regex`.
"""

from __future__ import annotations

from functools import cache, lru_cache

MAXCP = 0x10FFFF
UNIVERSE = ((0, 0xD7FF), (0xE000, MAXCP))  # Unicode scalar values (no surrogates)
EPS = ("eps",)


class PatternError(ValueError):
    """A pattern uses something that cannot be translated exactly."""


# -- character sets ------------------------------------------------------------------------------------------------
def cs_norm(ivs) -> tuple:
    out: list[list[int]] = []
    for lo, hi in sorted(ivs):
        if lo > hi:
            continue
        if out and lo <= out[-1][1] + 1:
            out[-1][1] = max(out[-1][1], hi)
        else:
            out.append([lo, hi])
    return cs_and(tuple((a, b) for a, b in out), UNIVERSE) if out and out[-1][1] >= 0xD800 else tuple(map(tuple, out))


def cs_and(a, b) -> tuple:
    out, i, j = [], 0, 0
    while i < len(a) and j < len(b):
        lo, hi = max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
        if lo <= hi:
            out.append((lo, hi))
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return tuple(out)


@lru_cache(maxsize=16384)
def cs_not(a) -> tuple:
    out, prev = [], 0
    for lo, hi in a:
        if lo > prev:
            out.append((prev, lo - 1))
        prev = hi + 1
    if prev <= MAXCP:
        out.append((prev, MAXCP))
    return cs_and(tuple(out), UNIVERSE)


def cs_or(a, b) -> tuple:
    return cs_norm(a + b)


def cs_chars(s: str) -> tuple:
    return cs_norm((ord(c), ord(c)) for c in s)


DIGIT = ((48, 57),)
WORD = cs_norm([(48, 57), (65, 90), (95, 95), (97, 122)])
SPACE = cs_norm([(9, 13), (32, 32), (0xA0, 0xA0), (0x1680, 0x1680), (0x2000, 0x200A), (0x2028, 0x2029),
                 (0x202F, 0x202F), (0x205F, 0x205F), (0x3000, 0x3000), (0xFEFF, 0xFEFF)])
DOT = cs_not(cs_chars("\n\r\u2028\u2029"))
ANY = UNIVERSE


# -- AST constructors (with light simplification) -------------------------------------------------------------------
def cset(ivs) -> tuple:
    return ("set", tuple(ivs))


def cat(*items) -> tuple:
    flat: list = []
    for it in items:
        if it == EPS:
            continue
        if it[0] == "none":
            return it
        flat.extend(it[1] if it[0] == "cat" else (it,))
    return EPS if not flat else flat[0] if len(flat) == 1 else ("cat", tuple(flat))


def alt(*items) -> tuple:
    flat: list = []
    sets: tuple = ()
    has_set = False
    for it in items:
        for x in it[1] if it[0] == "alt" else (it,):
            if x[0] == "none":
                continue
            if x[0] == "set":
                sets, has_set = cs_or(sets, x[1]), True
            elif x not in flat:
                flat.append(x)
    if has_set:
        flat.insert(0, ("set", sets))
    if not flat:
        return ("none",)
    if EPS in flat and len(flat) > 1:
        flat.remove(EPS)
        return rep(flat[0] if len(flat) == 1 else ("alt", tuple(flat)), 0, 1)
    return flat[0] if len(flat) == 1 else ("alt", tuple(flat))


def rep(node, lo: int, hi: int | None) -> tuple:
    if node == EPS or hi == 0:
        return EPS
    if node[0] == "none":
        return EPS if lo == 0 else node
    if lo == hi == 1:
        return node
    if node[0] == "rep" and node[2] in (0, 1) and node[3] is None and lo in (0, 1) and hi is None:
        return ("rep", node[1], min(lo, node[2]), None)
    return ("rep", node, lo, hi)


def literal(s: str) -> tuple:
    return cat(*(cset(((ord(c), ord(c)),)) for c in s))


# -- parser ---------------------------------------------------------------------------------------------------------
_CLASS_ESC = "dDwWsS"


@cache
def _python_class(esc: str) -> tuple:
    """Code points Python's ``re`` puts in ``\\d``/``\\w``/``\\s`` (Unicode str patterns)."""
    import re

    text = "".join(map(chr, range(0xD800))) + "".join(map(chr, range(0xE000, MAXCP + 1)))
    return cs_norm(_runs(ord(c) for c in re.findall(f"\\{esc}", text)))


def _runs(cps) -> list[tuple[int, int]]:
    out: list[list[int]] = []
    for cp in cps:
        if out and cp == out[-1][1] + 1:
            out[-1][1] = cp
        else:
            out.append([cp, cp])
    return [(lo, hi) for lo, hi in out]


@cache
def class_escape(c: str) -> tuple:
    """``\\d \\D \\w \\W \\s \\S`` as the code points ECMA-262 *and* Python's ``re`` agree on.

    JSON Schema patterns are ECMA-262, but validators in Python (``jsonschema``) run them with ``re``, where
    ``\\d``/``\\w``/``\\s`` are Unicode-wide and ECMA's ``\\s`` also holds U+FEFF. Generating only from the
    intersection (for a negated class: outside both) keeps every output valid under either reading."""
    ecma = {"d": DIGIT, "w": WORD, "s": SPACE}[c.lower()]
    py = _python_class(c.lower())
    return cs_and(ecma, py) if c.islower() else cs_not(cs_or(ecma, py))


_CTRL_ESC = {"n": 10, "r": 13, "t": 9, "f": 12, "v": 11, "0": 0}


class _Parser:
    def __init__(self, src: str) -> None:
        self.s, self.i = src, 0

    def error(self, what: str):
        raise PatternError(f"{what} at offset {self.i} in pattern {self.s!r}")

    def peek(self, k: int = 0) -> str:
        j = self.i + k
        return self.s[j] if j < len(self.s) else ""

    def parse(self) -> tuple:
        node = self.alternation()
        if self.i < len(self.s):
            self.error("unbalanced ')'")
        return node

    def alternation(self) -> tuple:
        branches = [self.sequence()]
        while self.peek() == "|":
            self.i += 1
            branches.append(self.sequence())
        return branches[0] if len(branches) == 1 else ("alt", tuple(branches))

    def sequence(self) -> tuple:
        items: list = []
        while self.i < len(self.s) and self.peek() not in "|)":
            atom = self.atom()
            items.append(self.quantifier(atom))
        return cat(*items)

    def quantifier(self, atom: tuple) -> tuple:
        c = self.peek()
        if c in ("*", "+", "?"):
            self.i += 1
            lo, hi = {"*": (0, None), "+": (1, None), "?": (0, 1)}[c]
        elif c == "{":
            j = self.s.find("}", self.i)
            body = self.s[self.i + 1:j] if j > 0 else ""
            parts = body.split(",")
            if j < 0 or not (1 <= len(parts) <= 2) or not parts[0].isdigit() or (len(parts) == 2 and parts[1]
                                                                                 and not parts[1].isdigit()):
                return atom  # a literal '{' (Annex B); the atom loop reads it next
            self.i = j + 1
            lo = int(parts[0])
            hi = lo if len(parts) == 1 else (int(parts[1]) if parts[1] else None)
            if hi is not None and hi < lo:
                self.error("bad quantifier range")
        else:
            return atom
        if self.peek() == "?":  # lazy: same language
            self.i += 1
        if atom[0] in ("bol", "eol", "look"):
            self.error("quantified anchor")
        return rep(atom, lo, hi)

    def atom(self) -> tuple:
        c = self.peek()
        self.i += 1
        if c == "^":
            return ("bol",)
        if c == "$":
            return ("eol",)
        if c == ".":
            return cset(DOT)
        if c == "(":
            if self.peek() == "?":
                nxt = self.peek(1)
                if nxt == ":":
                    self.i += 2
                elif nxt in ("<", "P") and self.peek(2) not in ("=", "!"):
                    j = self.s.find(">", self.i)
                    if j < 0:
                        self.error("bad group name")
                    self.i = j + 1
                elif nxt in ("=", "!"):  # lookahead: only supported right after '^' (see _branches)
                    self.i += 2
                    node = self.alternation()
                    if self.peek() != ")":
                        self.error("missing ')'")
                    self.i += 1
                    return ("look", nxt == "=", node)
                else:
                    self.error("lookbehind or inline flag")
            node = self.alternation()
            if self.peek() != ")":
                self.error("missing ')'")
            self.i += 1
            return node
        if c == "[":
            return cset(self.char_class())
        if c == "\\":
            return self.escape(in_class=False)
        if c in ("*", "+", "?"):
            self.error("nothing to repeat")
        if c == ")":
            self.error("unbalanced ')'")
        if c == "{" and self.i >= 2 and self.s[self.i - 2] in "*+?}":
            pass
        return cset(((ord(c), ord(c)),))

    def _hex(self, n: int) -> int:
        h = self.s[self.i:self.i + n]
        if len(h) != n or any(ch not in "0123456789abcdefABCDEF" for ch in h):
            self.error("bad hex escape")
        self.i += n
        return int(h, 16)

    def escape(self, in_class: bool):
        c = self.peek()
        if not c:
            self.error("trailing backslash")
        self.i += 1
        if c in _CLASS_ESC:
            return cset(class_escape(c))
        if c == "b" and in_class:
            return cset(((8, 8),))
        if c in "bB":
            self.error("word boundary")
        if c == "0" and not self.peek().isdigit():
            return cset(((0, 0),))
        if c.isdigit():
            self.error("backreference")
        if c in _CTRL_ESC:
            cp = _CTRL_ESC[c]
            return cset(((cp, cp),))
        if c == "x":
            cp = self._hex(2)
            return cset(((cp, cp),))
        if c == "u":
            if self.peek() == "{":
                j = self.s.find("}", self.i)
                try:
                    cp = int(self.s[self.i + 1:j], 16)
                except ValueError:
                    self.error("bad \\u{} escape")
                self.i = j + 1
            else:
                cp = self._hex(4)
                if 0xD800 <= cp <= 0xDBFF and self.s[self.i:self.i + 2] == "\\u":
                    save = self.i
                    self.i += 2
                    lo = self._hex(4)
                    if 0xDC00 <= lo <= 0xDFFF:
                        cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00)
                    else:
                        self.i = save
            if 0xD800 <= cp <= 0xDFFF:
                self.error("lone surrogate")
            return cset(((cp, cp),))
        if c == "c" and self.peek().isalpha():
            cp = ord(self.peek()) % 32
            self.i += 1
            return cset(((cp, cp),))
        if c in "pPk":
            self.error(f"\\{c} escape")
        if c.isalnum():
            self.error(f"unknown escape \\{c}")
        return cset(((ord(c), ord(c)),))

    def char_class(self) -> tuple:
        neg = self.peek() == "^"
        if neg:
            self.i += 1
        ivs: list = []
        first = True
        while True:
            c = self.peek()
            if not c:
                self.error("unterminated character class")
            if c == "]" and not first:
                self.i += 1
                break
            if c == "]" and first:  # ECMA: '[]' is the empty class, '[^]' matches anything
                self.i += 1
                return cs_not(()) if neg else ()
            first = False
            lo = self.class_atom()
            if self.peek() == "-" and self.peek(1) not in ("]", ""):
                self.i += 1
                hi = self.class_atom()
                if len(lo) != 1 or len(hi) != 1 or lo[0][0] != lo[0][1] or hi[0][0] != hi[0][1]:
                    self.error("class escape in a range")
                if hi[0][0] < lo[0][0]:
                    self.error("reversed range")
                ivs.append((lo[0][0], hi[0][0]))
            else:
                ivs.extend(lo)
        cs = cs_norm(ivs)
        return cs_not(cs) if neg else cs

    def class_atom(self) -> tuple:
        c = self.peek()
        self.i += 1
        if c == "\\":
            return self.escape(in_class=True)[1]
        if c == "[" and self.peek() in ":=.":
            self.error("POSIX class")
        return ((ord(c), ord(c)),)


def parse(pattern: str) -> tuple:
    """Parse an ECMA-262 pattern into the AST (anchors kept as ``bol``/``eol`` nodes)."""
    return _Parser(pattern).parse()


# -- measures -------------------------------------------------------------------------------------------------------
def min_len(n) -> int:
    k = n[0]
    if k == "set":
        return 1
    if k == "cat":
        return sum(min_len(x) for x in n[1])
    if k == "alt":
        return min(min_len(x) for x in n[1])
    if k == "rep":
        return n[2] * min_len(n[1])
    return 0


def max_len(n) -> int | None:
    k = n[0]
    if k == "set":
        return 1
    if k in ("cat", "alt"):
        vals = [max_len(x) for x in n[1]]
        if None in vals:
            return None
        return sum(vals) if k == "cat" else max(vals)
    if k == "rep":
        m = max_len(n[1])
        if m == 0:
            return 0
        return None if (n[3] is None or m is None) else n[3] * m
    return 0


def size(n) -> int:
    k = n[0]
    if k in ("cat", "alt"):
        return 1 + sum(size(x) for x in n[1])
    if k == "rep":
        return 1 + size(n[1])
    return 1


def ascii_only(n) -> bool:
    k = n[0]
    if k == "set":
        return not n[1] or n[1][-1][1] < 128
    if k in ("cat", "alt"):
        return all(ascii_only(x) for x in n[1])
    if k == "rep":
        return ascii_only(n[1])
    return True
