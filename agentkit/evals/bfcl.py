"""BFCL (Berkeley Function Calling Leaderboard) suite: load, prompt, call template, score.

Data layout (``evals/data/bfcl``): question files ``BFCL_v4_*.json`` (one JSON object per line: ``id``,
``question`` = list of turns of chat messages, ``function`` = candidate functions) and ``possible_answer/`` with the
same file names (``id``, ``ground_truth`` = ``[{FUNCTION: {ARG: [allowed values...]}}]``).

The output the model writes is one call in a canonical shape: ``{"name": "FN", "arguments": {...}}`` (in the
compiler's JSON style; :mod:`agentkit.toolcall` builds the template and parses the call). Under a template
the name is a ``Choice`` of pinned literals over the candidate functions (their common prefix, at least
``{"name": "``, pinned before the choice) and the arguments follow that function's compiled parameter schema
(BFCL's ``dict``/``float``/``tuple``/``any`` normalised to JSON Schema first; objects with declared properties
closed to them and arrays capped in length, see :meth:`BfclItem.call_params`).

Scoring follows BFCL's AST checker for Python (``bfcl_eval/eval_checker/ast_eval/ast_checker.py``,
``simple_function_checker``), re-implemented here:

- exactly one call; its name must equal the expected function's name (for several candidates, the one in the
  ground truth);
- every parameter the function lists as ``required`` is present;
- every provided argument is a parameter of the function *and* of the ground truth (else "unexpected parameter");
- an ``int`` where the function says ``float`` is accepted as that float;
- type check against the declared BFCL type (``string``->str, ``integer``->int, ``float``->float, ``boolean``->bool,
  ``array``/``tuple``->list, ``dict``->dict, ``any``->str; array items one level deep); a value of the ground
  truth's own type passes too (BFCL calls this a "variable") and is then compared by plain equality;
- strings are compared after BFCL's ``standardize_string``: spaces and the characters ``, . / - _ * ^`` removed,
  lower-cased, ``'`` -> ``"``; so string comparison is case-insensitive, as in BFCL. Lists compare element-wise with
  the same normalisation on string elements; dicts key by key (no unexpected keys, missing keys only where ``""``
  is allowed); lists of dicts dict by dict, same length;
- other values must be ``in`` the allowed list (Python equality, so ``5 == 5.0``);
- a ground-truth parameter not provided must have ``""`` among its allowed values.

``valid`` is separate from success: the parsed call validates with ``jsonschema`` against
``{"name": const FN, "arguments": <normalised parameter schema>}`` for one of the candidate functions.
"""

from __future__ import annotations

import copy
import json
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..constrain.nodes import Template
from ..toolcall import MAX_PARALLEL_CALLS as MAX_CALLS  # calls in one reply for the parallel categories
from ..toolcall import call_template, calls_template, parse_call, parse_calls, read_call

# -- data -------------------------------------------------------------------------------------------------------


@dataclass
class BfclItem:
    id: str
    category: str  # file stem without "BFCL_v4_": simple_python, multiple, ...
    messages: list[dict[str, str]]  # the question (first turn)
    functions: list[dict[str, Any]]  # BFCL function definitions, as in the file
    ground_truth: list[dict[str, dict[str, list]]]
    _params: dict[str, dict] = field(default_factory=dict, repr=False)  # normalised parameter schemas, by name
    _closed: dict[str, dict] = field(default_factory=dict, repr=False)

    def params(self, name: str) -> dict:
        """The function's parameter schema as JSON Schema (BFCL dialect normalised)."""
        if name not in self._params:
            from ..constrain.bfcl_dialect import normalize_function_schema

            fn = next(f for f in self.functions if f["name"] == name)
            self._params[name] = normalize_function_schema(fn.get("parameters") or {"type": "dict", "properties": {}})
        return self._params[name]

    def call_params(self, name: str) -> dict:
        """The parameter schema the call template is compiled from: :meth:`params` with every object that declares
        properties (and says nothing about extra ones) closed with ``additionalProperties: false`` -- a function takes
        the parameters it declares, and BFCL scores any other argument or dict key as wrong -- and every array
        without ``maxItems`` capped at ``ARRAY_CAP`` items, so a model stuck repeating an element inside an
        unbounded array still closes the call within the token budget (without the cap, 1 call in 40 on the
        default model ran out of budget mid-array and was invalid). Its language is a subset of :meth:`params`',
        so a constrained call still validates against the open schema."""
        if name not in self._closed:
            self._closed[name] = close_objects(copy.deepcopy(self.params(name)))
        return self._closed[name]

    @property
    def names(self) -> list[str]:
        return [f["name"] for f in self.functions]

    @property
    def parallel(self) -> bool:
        """A category whose answers are several calls (BFCL's ``parallel``, ``parallel_multiple``): known from the
        file's name, never from the ground truth."""
        return "parallel" in self.category


ARRAY_CAP = 16  # items, for arrays whose schema sets no maxItems (BFCL's answers have at most 7)


def close_objects(s: Any) -> Any:
    if isinstance(s, list):
        return [close_objects(x) for x in s]
    if not isinstance(s, dict):
        return s
    out = {}
    for k, v in s.items():
        if k in ("properties", "patternProperties", "$defs", "definitions") and isinstance(v, dict):
            out[k] = {name: close_objects(sub) for name, sub in v.items()}  # a map of schemas
        elif k in ("enum", "const", "default", "examples", "required"):
            out[k] = v  # values, not schemas
        else:
            out[k] = close_objects(v)
    if out.get("properties") and "additionalProperties" not in out and "patternProperties" not in out:
        out["additionalProperties"] = False
    if (out.get("type") == "array" or "items" in out) and "maxItems" not in out and out.get("minItems", 0) <= ARRAY_CAP:
        out["maxItems"] = ARRAY_CAP
    return out


def _question_files(data: Path) -> list[Path]:
    data = Path(data)
    if data.is_file():
        return [data]
    if not data.is_dir():
        raise FileNotFoundError(f"BFCL data {str(data)!r} not found")
    files = sorted(p for p in data.glob("*.json") if p.is_file())
    if not files:
        raise FileNotFoundError(f"no BFCL question files (*.json) in {str(data)!r}")
    return files


def _read_jsonl(path: Path) -> list[dict]:
    out = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line.strip():
                out.append(json.loads(line))
    return out


def load_file(path: Path, limit: int | None = None) -> list[BfclItem]:
    """One question file and its ``possible_answer/`` twin (at most ``limit`` questions, in file order)."""
    path = Path(path)
    answers_path = path.parent / "possible_answer" / path.name
    if not answers_path.is_file():
        raise FileNotFoundError(f"possible answers for {path.name} not found at {str(answers_path)!r}")
    answers = {a["id"]: a["ground_truth"] for a in _read_jsonl(answers_path)}
    category = path.stem.removeprefix("BFCL_v4_").removeprefix("BFCL_v3_")
    items = []
    for q in _read_jsonl(path):
        if limit is not None and len(items) >= limit:
            break
        if q["id"] not in answers:
            raise ValueError(f"{path.name}: no possible answer for {q['id']!r}")
        turns = q["question"]
        messages = turns[0] if turns and isinstance(turns[0], list) else turns
        items.append(BfclItem(id=q["id"], category=category, messages=list(messages), functions=q["function"],
                              ground_truth=answers[q["id"]]))
    return items


def load_bfcl(data: Path, limit: int | None = None) -> list[BfclItem]:
    """Every question file under ``data`` (or ``data`` itself when it is a file), at most ``limit`` per file.

    Files are interleaved round-robin (file order sorted by name), so a run stopped early has seen every category.
    """
    per_file = [load_file(p, limit) for p in _question_files(data)]
    out: list[BfclItem] = []
    for i in range(max((len(x) for x in per_file), default=0)):
        out.extend(x[i] for x in per_file if i < len(x))
    return out


# -- prompt and template -----------------------------------------------------------------------------------------

# the instructions the other prompts but "expert" start with (``PROMPTS["plain"]``)
PLAIN_PROMPT = (
    "You are a function-calling assistant. You can call the following function{s}:\n{functions}\n\n"
    "Answer the user's request with exactly one function call, written as JSON in this form:\n"
    '{{"name": "<function name>", "arguments": {{"<argument>": <value>, ...}}}}\n'
    "Reply with the JSON only."
)
# the worked example's call (a function no BFCL item has), shown by the default and by "example"
_EXAMPLE_CALL = '{{"name": "book_table", "arguments": {{"restaurant": "Marigold Bistro", "guests": 12}}}}'
# the default: the instructions and one short worked example (a function no item has) showing a value copied as the
# request writes it, a number as a number, and an optional argument the request does not mention left out (78 more
# prompt tokens than plain). On all 600 BFCL questions 0.422 against plain's 0.405, at 1.17x the
# p50 (README, "The system prompt"; evals/results/bfcl/prompts600.json.gz)
SYSTEM_PROMPT = PLAIN_PROMPT + (
    "\n\nFor example, for the request \"Book a table for 12 at Marigold Bistro\" and a function book_table with the "
    "arguments restaurant, guests and an optional time, the reply is:\n" + _EXAMPLE_CALL
)
# the function-calling system prompt SmolLM2-Instruct's model card gives (tools in <tools>, calls as JSON), asking
# for one call
EXPERT_PROMPT = (
    "You are an expert in composing functions. You are given a question and a set of possible functions. "
    "Based on the question, you will need to make one function call to achieve the purpose.\n\n"
    "You have access to the following tools:\n<tools>{functions}</tools>\n\n"
    "The output MUST strictly adhere to the following format, and NO other text MUST be included. "
    "Please make sure the parameter type is correct.\n"
    '{{"name": "func_name", "arguments": {{"argument1": "value1", "argument2": "value2"}}}}'
)
# plain with the worked example spelled out as the function's JSON Schema (142 more tokens than plain: 0.415)
EXAMPLE_PROMPT = PLAIN_PROMPT + (
    "\n\nFor example, given the function "
    '{{"name": "book_table", "parameters": {{"type": "object", "properties": {{"restaurant": {{"type": "string"}}, '
    '"guests": {{"type": "integer"}}, "time": {{"type": "string"}}}}, "required": ["restaurant", "guests"]}}}} '
    "and the request \"Book a table for 12 at Marigold Bistro\", the reply is:\n" + _EXAMPLE_CALL
)
# plain with the example's lessons as one sentence and no example (24 more tokens: 0.412)
RULES_PROMPT = PLAIN_PROMPT + (
    "\nUse the values the request gives, written as it writes them, and leave out optional arguments it does not "
    "mention."
)
PROMPTS = {"default": SYSTEM_PROMPT, "plain": PLAIN_PROMPT, "expert": EXPERT_PROMPT, "example": EXAMPLE_PROMPT,
           "rules": RULES_PROMPT}


def build_prompt(item: BfclItem, prompt: str = "default") -> list[dict[str, str]]:
    """System message describing the functions (parameters as JSON Schema) and asking for one call; the question.
    ``prompt``: a name in :data:`PROMPTS`."""
    fns = [{"name": f["name"], "description": f.get("description", ""), "parameters": item.params(f["name"])}
           for f in item.functions]
    system = PROMPTS[prompt].format(s="s" if len(fns) > 1 else "",
                                    functions="\n".join(json.dumps(f, ensure_ascii=False) for f in fns))
    if item.parallel:
        system += PARALLEL_NOTE
    return [{"role": "system", "content": system}, *item.messages]


# the parallel categories: the request may need several calls (BFCL's own prompt asks for "one or more")
PARALLEL_NOTE = ("\n\nIf the request needs several calls, write each one as such a JSON object, one call per line, "
                 "and nothing else.")


def call_schema(item: BfclItem) -> dict:
    """JSON Schema of a canonical call to any of the item's functions."""
    branches = [{"type": "object", "properties": {"name": {"const": n}, "arguments": item.params(n)},
                 "required": ["name", "arguments"], "additionalProperties": False} for n in item.names]
    return branches[0] if len(branches) == 1 else {"anyOf": branches}


@dataclass
class CallTemplates:
    """The compiled argument templates of one item, and what compiling them cost; ``template()`` wraps them."""

    item: BfclItem
    args: dict[str, Template]
    compile_ms: float
    style: str | None = None

    def template(self) -> Template:
        """A fresh call template (a new object, so constraint memo tables are not shared between modes):
        :func:`agentkit.toolcall.call_template` over the item's functions."""
        specs, meta = [(n, self.args[n]) for n in self.item.names], {"suite": "bfcl", "id": self.item.id}
        if self.item.parallel:  # one to MAX_CALLS calls, one per line
            tpl = calls_template(specs, max_calls=MAX_CALLS, style=self.style, meta=meta)
            tpl.compile_ms = self.compile_ms
            return tpl
        tpl = call_template(specs, style=self.style, meta=meta)
        tpl.schema, tpl.compile_ms = call_schema(self.item), self.compile_ms
        return tpl


def compile_call(item: BfclItem, *, cached: bool = False, style: str | None = None) -> CallTemplates:
    """Compile each candidate function's (normalised, closed) parameter schema in JSON ``style`` (None: the
    compiler's default). ``cached=False`` times a real compile."""
    from ..constrain import compiler

    fn = compiler.compile_schema if cached else compiler.compile_schema_uncached
    t0 = time.perf_counter()
    args = {n: fn(item.call_params(n), style=style) for n in item.names}
    ms = 1000 * (time.perf_counter() - t0)
    return CallTemplates(item=item, args=args, compile_ms=ms, style=style)


# -- parsing: agentkit.toolcall's one parser -----------------------------------------------------------------------

as_call = read_call


# -- scoring (BFCL AST checker, Python) ---------------------------------------------------------------------------

PY_TYPES: dict[str, type] = {"string": str, "integer": int, "float": float, "boolean": bool, "array": list,
                             "tuple": list, "dict": dict, "any": str}
NESTED_TYPES = ("array", "tuple")
_STD = re.compile(r"[ ,./\-_*^]")


def standardize_string(s: str) -> str:
    """BFCL's string normalisation: drop spaces and ``, . / - _ * ^``, lower-case, ``'`` -> ``"``."""
    return _STD.sub("", s).lower().replace("'", '"')


def _std(v: Any) -> Any:
    return standardize_string(v) if type(v) is str else v


@dataclass
class Verdict:
    ok: bool
    error: str = ""
    error_type: str = ""

    def __bool__(self) -> bool:
        return self.ok


OK = Verdict(True)


def _answer_type(allowed: list) -> type | None:
    for a in allowed:
        if a != "":
            return type(a)
    return None


def _type_check(value: Any, allowed: list, expected: type | None, nested: type | None) -> tuple[bool, bool]:
    """(type ok, is_variable), as BFCL's ``type_checker`` decides them."""
    ans_type = _answer_type(allowed)
    is_var = ans_type is not None and ans_type is not expected
    if expected is None:
        return True, is_var
    if type(value) is expected:
        if nested is None:
            return True, is_var
        for option in allowed:
            if not isinstance(option, list) or all(_type_check(v, option, nested, None)[0] for v in value):
                return True, is_var
    if ans_type is not None and type(value) is ans_type:
        return True, True
    return False, is_var


def _dict_ok(value: dict, allowed: list) -> bool:
    for option in allowed:
        if option == "" or not isinstance(option, dict):
            continue
        if all(k in option and _std(v) in [_std(a) for a in option[k]] for k, v in value.items()) and all(
            k in value or "" in vals for k, vals in option.items()
        ):
            return True
    return False


def _list_dict_ok(value: list, allowed: list) -> bool:
    for option in allowed:
        if isinstance(option, list) and len(option) == len(value) and all(
            isinstance(v, dict) and _dict_ok(v, [o]) for v, o in zip(value, option)
        ):
            return True
    return False


def _list_ok(value: list, allowed: list) -> bool:
    got = [_std(v) for v in value]
    # BFCL iterates each allowed option element-wise (so "" reads as an empty list)
    return any(isinstance(o, (list, str)) and got == [_std(x) for x in o] for o in allowed)


def check_arguments(fn: dict, name: str, args: Any, expected: dict[str, dict[str, list]]) -> Verdict:
    """BFCL ``simple_function_checker`` (Python) for one call ``name(**args)`` against one ground-truth entry."""
    (want, answer), = expected.items()
    if name != want:
        return Verdict(False, f"function name {want!r} not found (got {name!r})", "wrong_func_name")
    if not isinstance(args, dict):
        return Verdict(False, f"arguments are not an object: {args!r}", "wrong_arguments_type")
    params = (fn.get("parameters") or {}).get("properties", {}) or {}
    for p in (fn.get("parameters") or {}).get("required", []) or []:
        if p not in args:
            return Verdict(False, f"missing required parameter {p!r}", "missing_required")
    for p, value in args.items():
        if p not in params or p not in answer:
            return Verdict(False, f"unexpected parameter {p!r}", "unexpected_param")
        allowed = answer[p]
        decl = params[p].get("type") if isinstance(params[p], dict) else None
        exp_type = PY_TYPES.get(decl) if isinstance(decl, str) else None
        nested = None
        if decl in NESTED_TYPES:
            item_type = (params[p].get("items") or {}).get("type")
            nested = PY_TYPES.get(item_type) if isinstance(item_type, str) else None
        if decl == "float" and type(value) is int:
            value = float(value)
        type_ok, is_var = _type_check(value, allowed, exp_type, nested)
        if not type_ok:
            return Verdict(False, f"incorrect type for {p!r}: expected {decl}, got {type(value).__name__} "
                                  f"({value!r})", "type_error")
        if not is_var:
            if exp_type is dict:
                if not _dict_ok(value, allowed):
                    return Verdict(False, f"invalid value for {p!r}: {value!r}; allowed {allowed}", "value_error:dict")
                continue
            if exp_type is list and nested is dict:
                if not _list_dict_ok(value, allowed):
                    return Verdict(False, f"invalid value for {p!r}: {value!r}; allowed {allowed}",
                                   "value_error:list_dict")
                continue
            if exp_type is str:
                if _std(value) not in [_std(a) for a in allowed if type(a) is str]:
                    return Verdict(False, f"invalid value for {p!r}: {value!r}; allowed {allowed}",
                                   "value_error:string")
                continue
            if exp_type is list:
                if not _list_ok(value, allowed):
                    return Verdict(False, f"invalid value for {p!r}: {value!r}; allowed {allowed}",
                                   "value_error:list")
                continue
        if value not in allowed:
            return Verdict(False, f"invalid value for {p!r}: {value!r}; allowed {allowed}", "value_error:others")
    for p, allowed in answer.items():
        if p not in args and "" not in allowed:
            return Verdict(False, f"parameter {p!r} not provided and not optional", "missing_optional")
    return OK


def check_call(item: BfclItem, call: tuple[str, Any] | None) -> Verdict:
    """Score one parsed call (``None``: no call found) against the item's ground truth."""
    if call is None:
        return Verdict(False, "no function call found in the output", "no_call")
    if len(item.ground_truth) != 1:
        return Verdict(False, f"{len(item.ground_truth)} expected calls; only single calls are scored", "unsupported")
    expected = item.ground_truth[0]
    want = next(iter(expected))
    fn = next((f for f in item.functions if f["name"] == want), None)
    if fn is None:
        return Verdict(False, f"expected function {want!r} is not among the candidates", "bad_item")
    return check_arguments(fn, call[0], call[1], expected)


def check_calls(item: BfclItem, calls: list[tuple[str, Any]]) -> Verdict:
    """BFCL's parallel checker: as many calls as the ground truth lists, matched one to one (in any order) to
    expected calls that each accept it."""
    want = item.ground_truth
    if not calls:
        return Verdict(False, "no function call found in the output", "no_call")
    if len(calls) != len(want):
        return Verdict(False, f"{len(calls)} calls; {len(want)} expected", "parallel:wrong_count")

    def accepts(expected: dict, call: tuple[str, Any]) -> bool:
        name = next(iter(expected))
        fn = next((f for f in item.functions if f["name"] == name), None)
        return fn is not None and bool(check_arguments(fn, call[0], call[1], expected))

    ok = [[accepts(e, c) for c in calls] for e in want]

    def match(i: int, used: frozenset[int]) -> bool:  # expected call i onwards, calls in ``used`` taken
        return i == len(want) or any(ok[i][j] and match(i + 1, used | {j}) for j in range(len(calls))
                                     if j not in used)

    if match(0, frozenset()):
        return Verdict(True)
    return Verdict(False, "the calls do not match the expected calls one to one", "parallel:no_match")


def validate_call(item: BfclItem, call: tuple[str, Any] | None) -> bool:
    """Whether the call validates (jsonschema) against the canonical call schema of one of the candidates."""
    if call is None or call[0] not in item.names:
        return False
    import jsonschema

    schema = item.params(call[0])
    cls = jsonschema.validators.validator_for(schema)
    return cls(schema).is_valid(call[1])


def evaluate(item: BfclItem, text: str, value: Any = None) -> dict[str, Any]:
    """Parse (``value`` first: the template's parsed JSON), score and validate one output (every call of it in a
    parallel category)."""
    if item.parallel:
        calls = parse_calls(text, value)
        verdict = check_calls(item, calls)
        return {"success": verdict.ok, "valid": bool(calls) and all(validate_call(item, c) for c in calls),
                "error": verdict.error, "error_type": verdict.error_type,
                "calls": [{"name": n, "arguments": a} for n, a in calls]}
    call = parse_call(text, value)
    verdict = check_call(item, call)
    return {
        "success": verdict.ok,
        "valid": validate_call(item, call),
        "error": verdict.error,
        "error_type": verdict.error_type,
        "call": None if call is None else {"name": call[0], "arguments": call[1]},
    }
