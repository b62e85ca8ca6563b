"""ECMA-262 patterns (as JSON Schema uses them) → a small regex AST → regexes over *JSON-escaped* string bodies.

A JSON Schema ``pattern`` constrains the decoded string, but a slot writes the string's JSON text. This module
parses the pattern into an AST over code points, and emits a regex over canonical JSON escapes (the encoding
``json.dumps(..., ensure_ascii=False)`` writes: ``\\"``, ``\\\\``, ``\\b\\f\\n\\r\\t``, ``\\u00XX`` for other
controls, every other character as itself), in the syntax both Python ``re`` and Rust ``regex`` (outlines-core)
accept. Search semantics (an unanchored pattern may match anywhere) are made explicit.

AST nodes are tuples: ``("set", intervals)``, ``("cat", items)``, ``("alt", items)``, ``("rep", node, lo, hi)``
(``hi`` None = unbounded), ``("eps",)``, ``("bol",)``, ``("eol",)``. Intervals are sorted disjoint ``(lo, hi)``
code-point ranges. Unsupported features (backreferences, lookaround, word boundaries, Unicode properties, inline
flags) raise :class:`PatternError`.
"""

from __future__ import annotations

from functools import lru_cache

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
_CLASS_ESC = {"d": DIGIT, "D": cs_not(DIGIT), "w": WORD, "W": cs_not(WORD), "s": SPACE, "S": cs_not(SPACE)}
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
            return cset(_CLASS_ESC[c])
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


# -- anchors: search semantics --------------------------------------------------------------------------------------
def _has_anchor(n) -> bool:
    k = n[0]
    if k in ("bol", "eol", "look"):
        return True
    if k in ("cat", "alt"):
        return any(_has_anchor(x) for x in n[1])
    if k == "rep":
        return _has_anchor(n[1])
    return False


def _branches(n) -> list:
    """Split into alternatives ``(starts_anchored, body, ends_anchored, lookaheads)`` with no anchors left in
    ``body``; ``lookaheads`` are ``(positive, ast)`` pairs that hold at the start (after ``^``)."""
    if not _has_anchor(n):
        return [(False, n, False, ())]
    if n[0] == "alt":
        return [b for x in n[1] for b in _branches(x)]
    if n[0] in ("bol", "eol"):
        return [(n[0] == "bol", EPS, n[0] == "eol", ())]
    if n[0] == "look":
        raise PatternError("lookahead not after '^'")
    if n[0] == "cat":
        items = list(n[1])
        for i, x in enumerate(items):  # distribute an alternation that holds anchors
            if x[0] == "alt" and _has_anchor(x):
                return [b for y in x[1] for b in _branches(cat(*items[:i], y, *items[i + 1:]))]
        start = end = False
        looks = []
        while items and items[0][0] in ("bol", "eol", "look"):
            if items[0][0] == "eol" and len(items) > 1 and any(_nullable_not(x) for x in items[1:]):
                raise PatternError("'$' before more text")
            if items[0][0] == "look":
                if not start:
                    raise PatternError("lookahead not after '^'")
                looks.append((items[0][1], items[0][2]))
            start |= items[0][0] == "bol"
            end |= items[0][0] == "eol"
            items.pop(0)
        while items and items[-1][0] in ("bol", "eol"):
            end |= items[-1][0] == "eol"
            start |= items[-1][0] == "bol" and not items[:-1]
            items.pop()
        body = cat(*items)
        if _has_anchor(body):
            raise PatternError("anchor inside the pattern")
        return [(start, body, end, tuple(looks))]
    raise PatternError("anchor inside a repetition")


def _nullable_not(n) -> bool:
    return n[0] not in ("bol", "eol", "look") and min_len(n) > 0


def _prefix_lang(n) -> tuple:
    """Strings that start with a match of ``n`` (a lookahead's body; ``$`` inside means the end)."""
    anyrep = rep(cset(ANY), 0, None)
    out = []
    for _s, body, end, looks in _branches(n):
        if looks:
            raise PatternError("nested lookahead")
        out.append(cat(body, EPS if end else anyrep))
    return alt(*out)


def search_ast(pattern: str | tuple) -> tuple:
    """The language of strings that ``pattern`` matches somewhere (JSON Schema ``pattern`` semantics)."""
    n = parse(pattern) if isinstance(pattern, str) else pattern
    branches = _branches(n)
    anyrep = rep(cset(ANY), 0, None)
    if any(b[3] for b in branches):
        return _with_lookaheads(branches)
    out = []
    for start, body, end, _looks in branches:
        if min_len(body) == 0 and not (start and end):
            return anyrep
        out.append(cat(EPS if start else anyrep, body, EPS if end else anyrep))
    return alt(*out)


def _with_lookaheads(branches) -> tuple:
    """Lookaheads at the start are intersections (or differences) of languages: computed on automata."""
    from .automata import complement, from_ast, intersect, minimize, to_ast, trim, union

    anyrep = rep(cset(ANY), 0, None)
    total = None
    for _start, body, end, looks in branches:
        d = from_ast(cat(body, EPS if end else anyrep))
        for positive, x in looks:
            other = from_ast(_prefix_lang(x))
            d = intersect(d, other if positive else complement(other))
            t = trim(d)
            d = minimize(t) if t is not None else d
        total = d if total is None else union(total, d)
    return to_ast(total)


def full_ast(pattern: str) -> tuple:
    """``pattern`` matched against the whole string (anchors, if any, must be at the ends)."""
    out = []
    for _s, body, _e, looks in _branches(parse(pattern)):
        if looks:
            raise PatternError("lookahead")
        out.append(body)
    return alt(*out)


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


# -- emission -------------------------------------------------------------------------------------------------------
_META = set("\\.+*?()|[]{}^$#&-~")
_NAMED = {8: "b", 9: "t", 10: "n", 12: "f", 13: "r"}
_UNSAFE = ((0, 31), (34, 34), (92, 92))


def _cp(c: int) -> str:
    ch = chr(c)
    if ch in _META:
        return "\\" + ch
    if 33 <= c < 127 or (c > 160 and ch.isprintable() and c <= 0xFFFF and not ch.isspace()):
        return ch
    if c < 256:
        return f"\\x{c:02x}"
    return f"\\u{c:04x}" if c <= 0xFFFF else f"\\U{c:08x}"


def _class(ivs) -> str:
    if len(ivs) == 1 and ivs[0][0] == ivs[0][1]:
        return _cp(ivs[0][0])
    excl = cs_or(cs_not(ivs), _UNSAFE)  # what the class leaves out (always including the unsafe characters)
    if len(excl) < len(ivs) or ivs[-1][1] > 0xFFFF:
        body = "".join(_cp(a) if a == b else f"{_cp(a)}-{_cp(b)}" for a, b in excl)
        return f"[^{body}]"
    body = "".join(_cp(a) if a == b else (f"{_cp(a)}{_cp(b)}" if b == a + 1 else f"{_cp(a)}-{_cp(b)}")
                   for a, b in ivs)
    return f"[{body}]"


def _escaped(ivs) -> list[str]:
    named, plain = [], []
    for lo, hi in cs_and(ivs, ((0, 31), (34, 34), (92, 92))):
        for c in range(lo, hi + 1):
            (named if c in _NAMED or c in (34, 92) else plain).append(c)
    alts = []
    names = ['"' if c == 34 else "\\\\" if c == 92 else _NAMED[c] for c in named]
    if names:
        alts.append("\\\\" + (names[0] if len(names) == 1 else "[" + "".join(names) + "]"))
    # Other control characters (canonically \u00XX) are left out: outlines-core builds DFAs for counted
    # repetitions of a unit with a \u escape in super-linear time. Tighter than JSON, never looser.
    return alts


def _hex_alt(codes: list[int]) -> str:
    groups: dict[str, list[int]] = {}
    for c in codes:
        groups.setdefault(f"{c >> 4:x}", []).append(c & 15)
    parts = []
    for hi, lows in groups.items():
        runs: list[list[int]] = []
        for x in lows:
            if runs and x == runs[-1][1] + 1 and x != 10:
                runs[-1][1] = x
            else:
                runs.append([x, x])
        body = "".join(f"{a:x}" if a == b else f"{a:x}{b:x}" if b == a + 1 else f"{a:x}-{b:x}" for a, b in runs)
        parts.append(hi + (body if len(lows) == 1 else f"[{body}]"))
    return parts[0] if len(parts) == 1 else "(?:" + "|".join(parts) + ")"


@lru_cache(maxsize=16384)
def emit_set(ivs) -> tuple[str, bool]:
    """A set of code points as JSON-body regex; second value: whether it is a single atom."""
    safe = cs_and(ivs, cs_not(_UNSAFE))
    alts = ([_class(safe)] if safe else []) + _escaped(ivs)
    if not alts:
        raise PatternError("empty character class")
    if len(alts) == 1:
        a = alts[0]
        return a, a.startswith(("[", "\\x", "\\u", "\\U")) or len(a) == 1 or (len(a) == 2 and a[0] == "\\")
    return "(?:" + "|".join(alts) + ")", True


@lru_cache(maxsize=4096)
def emit(n) -> str:
    """Regex (Python ``re`` and Rust ``regex`` compatible) over canonical JSON-escaped text for AST ``n``."""
    return _emit(n)[0]


def _emit(n) -> tuple[str, bool]:
    k = n[0]
    if k == "eps":
        return "", False
    if k == "set":
        return emit_set(n[1])
    if k == "cat":
        return "".join(_group(x, alt_only=True) for x in n[1]), False
    if k == "alt":
        parts = [_emit(x)[0] for x in n[1]]
        return "(?:" + "|".join(parts) + ")", True
    if k == "rep":
        inner = _group(n[1], alt_only=False)
        lo, hi = n[2], n[3]
        if not inner:
            return "", False
        q = ("*" if lo == 0 else "+" if lo == 1 else f"{{{lo},}}") if hi is None else (
            "?" if (lo, hi) == (0, 1) else f"{{{lo}}}" if lo == hi else f"{{{lo},{hi}}}")
        return inner + q, False
    if k == "none":
        raise PatternError("empty language")
    raise PatternError(f"anchor {k} left in the pattern")


def _group(n, alt_only: bool) -> str:
    s, atom = _emit(n)
    if atom or not s:
        return s
    if alt_only and n[0] != "alt":
        return s
    return f"(?:{s})"


def except_words(words) -> tuple:
    """AST of every string except ``words`` (a trie walk: linear in the words' total length)."""
    return _except_words(tuple(sorted(set(words))))


@lru_cache(maxsize=1024)
def _except_words(words: tuple) -> tuple:
    trie: dict = {}
    for w in words:
        node = trie
        for ch in w:
            node = node.setdefault(ch, {})
        node[""] = {}
    anyrep = rep(cset(ANY), 0, None)

    def sub(node: dict) -> tuple:
        kids = sorted(k for k in node if k)
        opts = [] if "" in node else [EPS]
        rest = cs_not(cs_chars("".join(kids)))
        if rest:
            opts.append(cat(cset(rest), anyrep))
        opts += [cat(literal(k), sub(node[k])) for k in kids]
        return alt(*opts)

    return sub(trie)
