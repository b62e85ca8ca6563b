"""Pattern languages over whole strings, and their regexes over *JSON-escaped* string bodies.

A JSON Schema ``pattern`` constrains the decoded string, but a slot writes the string's JSON text. This module
makes search semantics explicit (an unanchored pattern may match anywhere: :func:`search_ast`) and emits a regex
over canonical JSON escapes (what ``json.dumps(..., ensure_ascii=False)`` writes: ``\\"``, ``\\\\``,
``\\b\\f\\n\\r\\t``, every other character as itself), in the syntax both Python ``re`` and Rust ``regex``
(outlines-core) accept (:func:`emit`). Other control characters are left out of every language (tighter, never
looser): outlines-core builds DFAs for counted repetitions of a unit holding a ``\\u`` escape in super-linear time.
"""

from __future__ import annotations

from functools import lru_cache

from .ecma_regex import (
    ANY,
    EPS,
    PatternError,
    alt,
    cat,
    cs_and,
    cs_chars,
    cs_not,
    cs_or,
    cset,
    literal,
    min_len,
    parse,
    rep,
)


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


def _trie(words) -> dict:
    """Character trie of ``words``; the key ``""`` marks the end of a word."""
    trie: dict = {}
    for w in words:
        node = trie
        for ch in w:
            node = node.setdefault(ch, {})
        node[""] = {}
    return trie


@lru_cache(maxsize=1024)
def _except_words(words: tuple) -> tuple:
    trie = _trie(words)
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


_SAFE_ASCII = ((32, 33), (35, 91), (93, 126))  # printable ASCII but '"' and '\'
_OTHER = '(?:[^\\x00-\\x7f]|\\\\[btnfr"\\\\])'  # characters no plain name holds: non-ASCII and escapes


def except_words_regex(words) -> str:
    """Regex (JSON-escaped text) for every string except ``words``, shaped for outlines-core: the trie of the words
    appears three times but "any text" (``U*``) and the non-ASCII class only once or twice, which keeps its DFA
    construction fast (the plain trie-with-``U*``-leaves shape takes exponential time there). Memoised: each
    branch of an N-way ``anyOf`` of open objects asks for the same N names."""
    return _except_words_regex(tuple(sorted(set(words))))


@lru_cache(maxsize=256)
def _except_words_regex(words: tuple[str, ...]) -> str:
    if any(any(not (32 <= ord(ch) < 127) or ch in '"\\\\' for ch in w) for w in words):
        return emit(except_words(words))
    trie = _trie(words)
    u = emit(rep(cset(ANY), 0, None))

    def esc(ch: str) -> str:
        return emit(literal(ch))

    def prefixes_not_words(n: dict) -> str | None:  # the trie prefixes that are not words ("" included); None: none
        parts = [esc(k) + sub for k, c in sorted(n.items()) if k for sub in [prefixes_not_words(c)] if sub is not None]
        opt = "" not in n
        if not parts:
            return "" if opt else None
        body = "|".join(parts)
        return f"(?:{body})?" if opt else f"(?:{body})"

    def ascii_escape(n: dict) -> str:  # a trie prefix, then an ASCII character that leaves the trie
        kids = [k for k in n if k]
        rest = cs_and(_SAFE_ASCII, cs_not(cs_chars("".join(kids))))
        parts = ([emit(cset(rest))] if rest else []) + [esc(k) + ascii_escape(n[k]) for k in sorted(kids)]
        return parts[0] if len(parts) == 1 else "(?:" + "|".join(parts) + ")"

    def any_prefix(n: dict) -> str:  # any trie prefix, "" included
        parts = [esc(k) + any_prefix(c) for k, c in sorted(n.items()) if k]
        return "" if not parts else "(?:" + "|".join(parts) + ")?"

    nonword = prefixes_not_words(trie)
    alts = [] if nonword is None else [nonword]
    alts += [ascii_escape(trie) + u, any_prefix(trie) + _OTHER + u]
    return "(?:" + "|".join(a for a in alts) + ")"
