"""Additional properties of an object in the layout: one ``"key": value`` node whose key slot is the language of the
keys allowed besides the listed properties (``additionalProperties``, ``patternProperties``, ``propertyNames``,
``strict``), and the "some property must..." (``Flat.need``) conditions ``not`` produces.

Each function takes the builder it works for (``b``, a :class:`~agentkit.constrain.builder.ValueBuilder`: the
:class:`~agentkit.constrain.layout.Layout`).
"""

from __future__ import annotations

import json
import re
from typing import Any

from ..errors import UnsupportedSchemaError
from . import automata
from .builder import ValueBuilder
from .canonical import pattern_matches, walk
from .dnf import Flat, effective_types
from .ecma_regex import ANY, PatternError, alt, cset, literal, rep
from .json_regex import emit, except_words_regex, search_ast
from .nodes import DEFAULT_SLOT_TOKENS, Lit, Node, Slot, choice, seq
from .scalars import check_repeats, string_ast

ANYKEY = rep(cset(ANY), 0, None)
Branch = tuple[Any, list, list, str]  # (key AST, value conj, order schemas for the value, pointer)


def extra_node(b: ValueBuilder, f: Flat, names: list, order: list, iptr: str, ctx: int, need=None) -> Node | None:
    """One additional property (``"key":value``) or None when none is allowed; with ``need``, one that also
    meets that ``Flat.need`` condition."""
    clauses = [c for c in f.oclauses if c[1] or (c[2] is not None and c[2][0] is not True)]
    if b.strict and names and not any(c[1] or c[2] is not None for c in f.oclauses):
        return None  # strict: properties listed and extras never mentioned -> none
    branches = _branches(clauses, order, b)
    pn_asts = [_pname_ast(b, s, p, ctx) for s, p in f.pnames]
    need_in, need_out = _need_key(b, need, ctx) if need else ([], [])
    opts = []
    for key, conj, vorder, p in branches:
        nots = []
        if key[0] == "not":
            key, nots = ANYKEY, key[1]
        words = [n for n in names if key is ANYKEY or _in_lang(key, n)]
        if need:
            conj = [*conj, need[1]]
        regex = _key_regex(key, nots, words, pn_asts, need_in, need_out, bool(need), p)
        if regex is None:
            continue
        node = b.value(conj, vorder, f"{iptr}/*", ctx)
        if node is None:
            continue
        opts.append(seq(Lit('"'), Slot(regex, DEFAULT_SLOT_TOKENS, f"{iptr}/*key"), Lit('"' + b.style.key_sep), node))
    return choice(opts)


def _key_regex(key, nots: list, words: list[str], pn_asts: list, need_in: list, need_out: list, need: bool,
               p: str) -> str | None:
    """The key slot's regex: in ``key`` and every ``pn_asts``/``need_in``, in no ``nots``/``need_out``, not one of
    the listed ``words``; None when no key is left."""
    try:
        if key is ANYKEY and not nots and not pn_asts and not need:
            return except_words_regex(words)
        ka = automata.lang_and([key] + pn_asts + need_in, not_asts=nots + need_out, not_words=words)
        if ka[0] == "none":
            return None
        check_repeats(ka, "propertyNames", p)
        return emit(ka)
    except PatternError as e:
        raise UnsupportedSchemaError("additionalProperties", p, str(e)) from None


def _branches(clauses: list, order: list, b: ValueBuilder) -> list[Branch]:
    """The kinds of extra key, each with the schemas its value must meet."""
    ws = walk(order, b.res)
    addl_order = [s["additionalProperties"] for s in ws if isinstance(s.get("additionalProperties"), dict)]
    if not clauses:
        return [(ANYKEY, [], addl_order, "#")]
    if not (len(clauses) == 1 or all(not c[1] for c in clauses)):
        raise UnsupportedSchemaError("patternProperties", clauses[0][3], "several objects constrain extra keys")
    pats = clauses[0][1] if len(clauses) == 1 else ()
    cp = clauses[0][3]
    pasts, porders = [], []
    for rx, sch in pats:
        try:
            pasts.append(search_ast(rx))
        except PatternError as e:
            raise UnsupportedSchemaError("patternProperties", sch[1], str(e)) from None
        porders.append([s["patternProperties"][rx] for s in ws
                        if isinstance(s.get("patternProperties"), dict) and rx in s["patternProperties"]])
    branches = _pattern_branches(pats, pasts, porders, cp)
    addls = [c[2] for c in clauses if c[2] is not None and c[2][0] is not True]
    if not any(s is False for s, _ in addls):
        key = ANYKEY if not pasts else ("not", pasts)
        branches.append((key, addls, addl_order, addls[0][1] if addls else cp))
    return branches


def _pattern_branches(pats, pasts: list, porders: list, cp: str) -> list[Branch]:
    """Keys matching ``patternProperties``: one branch a pattern when they cannot overlap, else one per region of
    keys matching exactly the patterns in a subset."""
    overlap = any(pats[i][1][0] != pats[j][1][0] and not automata.ast_empty([pasts[i], pasts[j]])
                  for i in range(len(pasts)) for j in range(i + 1, len(pasts)))
    if not overlap:
        return [(a, [sch], o, sch[1]) for a, (_rx, sch), o in zip(pasts, pats, porders)]
    if len(pats) > 4:
        raise UnsupportedSchemaError("patternProperties", cp, "more than 4 overlapping patterns")
    branches: list[Branch] = []
    for bits in range(1, 1 << len(pats)):
        ins = [i for i in range(len(pats)) if bits >> i & 1]
        outs = [pasts[i] for i in range(len(pats)) if not bits >> i & 1]
        try:
            region = automata.lang_and([pasts[i] for i in ins], not_asts=outs)
        except PatternError as e:
            raise UnsupportedSchemaError("patternProperties", cp, str(e)) from None
        if region[0] != "none":
            branches.append((region, [pats[i][1] for i in ins], [x for i in ins for x in porders[i]],
                             pats[ins[0]][1][1]))
    return branches


def _pname_ast(b: ValueBuilder, s, p: str, ctx: int):
    """The language of the keys ``propertyNames`` schema ``s`` allows."""
    pf = b.norm.dnf([(s, p)], ctx)
    return alt(*(_key_lang(x) for x in pf)) if pf else ("none",)


def _key_lang(f: Flat):
    if "string" not in effective_types(f):
        return ("none",)
    if f.enum is not None:
        return alt(*(literal(v) for v in f.enum if isinstance(v, str)))
    return string_ast(f)


def _need_key(b: ValueBuilder, need, ctx: int) -> tuple[list, list]:
    """(ASTs the key must be in, ASTs it must not be in) for a ``Flat.need`` key spec."""
    spec = need[0]
    try:
        if spec[0] == "extra":
            return [], [search_ast(rx) for rx in spec[2]]
        if spec[0] == "pattern":
            return [search_ast(spec[1])], []
        return [], [_pname_ast(b, spec[1][0], spec[1][1], ctx)]
    except PatternError as e:
        raise UnsupportedSchemaError("not", need[1][1], str(e)) from None


def need_member(b: ValueBuilder, need, name: str) -> bool:
    """Whether listed property ``name`` is one a ``Flat.need`` condition can be met by."""
    spec = need[0]
    if spec[0] == "extra":
        return name not in spec[1] and not any(pattern_matches(rx, name) for rx in spec[2])
    if spec[0] == "pattern":
        return pattern_matches(spec[1], name)
    return not b.literals.valid(name, [spec[1]], spec[1][1])


def _in_lang(a, word: str) -> bool:
    """Whether ``word`` is in the language of AST ``a``."""
    return re.fullmatch(emit(a), json.dumps(word, ensure_ascii=False)[1:-1]) is not None
