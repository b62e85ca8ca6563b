"""Training data for the repair adapter (issue 49 item 2): single-line mutations of the pure-Python standard
library, each as the prompt the repair loop's :class:`~agentkit.repair.ModelDrafter` sends for that line.

Source: functions (module-level ones and methods of module-level classes, 3 to ``MAX_FUNCTION_LINES`` lines) of the
modules in :data:`TRAIN_MODULES` and :data:`VALIDATION_MODULES`, read from the running interpreter's standard
library folder (``sysconfig``'s ``stdlib`` path). Validation is split by module: no validation module is trained on.

An example is one site: a line of a function where an operator of :mod:`agentkit.repair.mutate` applies. The line is
replaced by one operator variant (the kinds taken in turn, so the least used kind that applies at the site is
chosen), and the mutated function becomes a :class:`~agentkit.repair.draft.Site`. The example's ``messages`` and
``prefix`` are :func:`agentkit.repair.draft.build_prompt` of that site (the same builder the drafter calls), with
no failure message (nothing is run here, so there is no failing assertion to show: the drafter's form for a site
without one), and the ``target`` is the original line between the newlines the drafter scores (``"\\n" + line +
"\\n"``, no end-of-turn token: :data:`agentkit.training.sft.OPEN_STEPS`). The prompt shows the line as a hole, so
two mutants of one line give the same example; one is kept per site.

Benchmark functions never reach the data: every function of the repair benchmark's programs and tests
(``evals/repair_tasks``, dev and held-out), the toy repositories (``evals/coding_tasks``) and
``examples/buggy_repo`` is keyed by :func:`normalised` (its ``ast.dump`` with the name and docstring dropped), and a
standard-library function with the same key is removed (``benchmark_removed`` in ``stats.json``; none of these
modules' functions has one). A validation function whose key a training function has is removed too (``excluded``). ::

    python -m agentkit.training.repair_data --out out/repair-data
"""

from __future__ import annotations

import argparse
import ast
import copy
import json
import random
import sysconfig
import zlib
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..repair.draft import Site, build_prompt
from ..repair.mutate import KINDS, LineEdit, apply_line, docstring_lines, line_variants

REPO = Path(__file__).resolve().parents[2]
MAX_FUNCTION_LINES = 40
SITES_PER_FUNCTION = 4
STEP = "repair"

TRAIN_MODULES = (
    "textwrap", "statistics", "heapq", "bisect", "fractions", "string", "difflib", "calendar", "fnmatch",
    "posixpath", "ntpath", "base64", "quopri", "random", "functools", "copy", "pprint", "reprlib", "ipaddress",
    "configparser", "csv", "argparse", "optparse", "gettext", "tokenize", "inspect", "ast", "cmd", "codeop",
    "datetime", "numbers", "tarfile", "zipfile", "email/utils", "email/_parseaddr", "urllib/parse",
    "http/cookies", "mailbox", "sched", "queue", "ftplib", "smtplib", "imaplib", "pickletools", "dis", "traceback",
    "linecache", "tabnanny", "trace", "pstats", "timeit", "_pydecimal", "locale", "re/_parser", "re/_compiler",
    "json/encoder", "json/decoder", "html/parser", "html/__init__", "xml/dom/minidom", "logging/__init__",
    "collections/__init__", "enum", "dataclasses", "operator", "contextlib", "shutil", "tempfile", "glob",
    "pathlib", "subprocess", "threading", "weakref", "fileinput", "getopt", "gzip", "hashlib", "hmac", "secrets",
    "uuid", "selectors", "socketserver", "sre_constants", "symtable", "tomllib/_parser", "wave", "zipapp",
)
VALIDATION_MODULES = ("colorsys", "graphlib", "shlex", "netrc", "plistlib", "mimetypes", "chunk", "aifc")


class BenchmarkLeakError(RuntimeError):
    """A generated example's function is one of the repair benchmark's."""


@dataclass(frozen=True)
class Function:
    """A function's standalone source (a method inside a one-line ``class`` header) and where it came from."""

    module: str
    qualname: str
    source: str
    node_line: int  # the ``def`` line in ``source``


def stdlib_dir() -> Path:
    return Path(sysconfig.get_paths()["stdlib"])


def normalised(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> str:
    """The function's ``ast.dump`` without its name, docstring and decorators: a key equal for the same code."""
    node = copy.deepcopy(fn)
    node.name = "_"
    node.decorator_list = []
    body = node.body
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
            and isinstance(body[0].value.value, str):
        node.body = body[1:] or [ast.Pass()]
    return ast.dump(node, include_attributes=False)


def functions_of(source: str) -> Iterator[ast.FunctionDef | ast.AsyncFunctionDef]:
    """Every function definition of ``source`` (nested ones too)."""
    for n in ast.walk(ast.parse(source)):
        if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef):
            yield n


def benchmark_sources() -> dict[str, str]:
    """Every Python file of the repair benchmark (programs and tests, both splits), the toy repositories and the
    example repository, by a name that says where it came from."""
    from ..evals.coding import load_tasks as load_toys
    from ..evals.repair_tasks import load_programs

    out: dict[str, str] = {}
    for p in load_programs():
        out[f"repair_tasks/{p['name']}.py"] = p["module"]
        out[f"repair_tasks/test_{p['name']}.py"] = p["tests"]
    for t in load_toys():
        out.update({f"coding_tasks/{t['id']}/{rel}": text for rel, text in t["files"].items() if rel.endswith(".py")})
    for f in sorted((REPO / "examples" / "buggy_repo").glob("*.py")):
        out[f"buggy_repo/{f.name}"] = f.read_text(encoding="utf-8")
    return out


def benchmark_keys(sources: dict[str, str] | None = None) -> set[str]:
    """:func:`normalised` keys of every benchmark function."""
    return {normalised(fn) for text in (sources or benchmark_sources()).values() for fn in functions_of(text)}


def module_functions(module: str, root: Path | None = None) -> list[Function]:
    """Module-level functions and methods of module-level classes of stdlib ``module`` (``a/b`` for ``a.b``),
    3 to ``MAX_FUNCTION_LINES`` lines, each as a standalone source."""
    path = (root or stdlib_dir()) / f"{module}.py"
    text = path.read_text(encoding="utf-8")
    lines = text.splitlines()
    tree = ast.parse(text)
    out: list[Function] = []
    for top in tree.body:
        owners = [(None, top)] if not isinstance(top, ast.ClassDef) else [(top.name, n) for n in top.body]
        for cls, fn in owners:
            if not isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            start = min([fn.lineno, *(d.lineno for d in fn.decorator_list)])
            end = fn.end_lineno or fn.lineno
            if not 3 <= end - start + 1 <= MAX_FUNCTION_LINES:
                continue
            body = lines[start - 1:end]
            src = "\n".join(body) + "\n" if cls is None else f"class {cls}:\n" + "\n".join(body) + "\n"
            offset = fn.lineno - start + (1 if cls is None else 2)
            out.append(Function(module, f"{cls}.{fn.name}" if cls else fn.name, src, offset))
    return out


def function_key(fn: Function) -> str:
    node = next(n for n in functions_of(fn.source) if n.lineno == fn.node_line)
    return normalised(node)


def site_lines(fn: Function) -> list[int]:
    """The lines of ``fn``'s body that can hold a mutation (docstring lines excluded)."""
    tree = ast.parse(fn.source)
    node = next(n for n in functions_of(fn.source) if n.lineno == fn.node_line)
    doc = docstring_lines(tree)
    return [ln for ln in range(node.body[0].lineno, (node.end_lineno or node.lineno) + 1) if ln not in doc]


def choose(variants: list[LineEdit], used: Counter, rng: random.Random) -> LineEdit:
    """The variant of the least used kind so far (ties: a seeded random one)."""
    low = min(used[v.kind] for v in variants)
    return rng.choice([v for v in variants if used[v.kind] == low])


def example(fn: Function, edit: LineEdit, original: str) -> dict[str, Any]:
    """The drafter's prompt for the mutated line of ``fn`` and the original line as the target."""
    mutated = apply_line(fn.source, edit)
    site = Site(f"{fn.module}.py", mutated, edit.line)
    messages, pinned = build_prompt(site)
    return {"messages": messages, "prefix": pinned, "target": "\n" + original + "\n", "step": STEP,
            "meta": {"module": fn.module, "function": fn.qualname, "line": edit.line, "kind": edit.kind,
                     "mutated": edit.text, "original": original, "source": fn.source}}


def function_examples(fn: Function, used: Counter, rng: random.Random,
                      per_function: int = SITES_PER_FUNCTION) -> list[dict[str, Any]]:
    """Up to ``per_function`` examples of ``fn``, one per site, at sites drawn at random."""
    tree = ast.parse(fn.source)
    lines = fn.source.splitlines()
    sites = site_lines(fn)
    rng.shuffle(sites)
    out: list[dict[str, Any]] = []
    for ln in sites:
        variants = line_variants(fn.source, ln, tree)
        if not variants:
            continue
        edit = choose(variants, used, rng)
        used[edit.kind] += 1
        out.append(example(fn, edit, lines[ln - 1]))
        if len(out) >= per_function:
            break
    return out


def build(modules: Iterable[str], *, benchmark: set[str], seed: int, exclude: frozenset[str] | set[str] = frozenset(),
          per_function: int = SITES_PER_FUNCTION, root: Path | None = None) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Examples from ``modules`` and counts: a function whose key is in ``benchmark`` is left out
    (``benchmark_removed``), one in ``exclude`` too (``excluded``: the training split's, for validation), and each
    key is used once (``duplicates``)."""
    used: Counter = Counter()
    seen: set[str] = set()
    counts = Counter()
    examples: list[dict[str, Any]] = []
    for module in modules:
        rng = random.Random(seed * 1_000_003 + zlib.crc32(module.encode()))
        for fn in module_functions(module, root):
            counts["functions"] += 1
            key = function_key(fn)
            if key in benchmark:
                counts["benchmark_removed"] += 1
                continue
            if key in exclude:
                counts["excluded"] += 1
                continue
            if key in seen:
                counts["duplicates"] += 1
                continue
            seen.add(key)
            got = function_examples(fn, used, rng, per_function)
            counts["functions_used"] += bool(got)
            examples += got
    for k in ("benchmark_removed", "excluded", "duplicates"):
        counts.setdefault(k, 0)  # zeros written too
    return examples, {**counts, "examples": len(examples), "by_kind": dict(sorted(used.items())), "keys": seen}


def check_no_leak(examples: Iterable[dict[str, Any]], keys: set[str]) -> None:
    """:class:`BenchmarkLeakError` when an example's function (its original source) has a benchmark key."""
    for ex in examples:
        src = ex["meta"]["source"]
        if any(normalised(fn) in keys for fn in functions_of(src)):
            raise BenchmarkLeakError(f"{ex['meta']['module']}.{ex['meta']['function']} is a benchmark function")


def make(out: Path, seed: int = 0, per_function: int = SITES_PER_FUNCTION) -> dict[str, Any]:
    """``out/train.jsonl``, ``out/val.jsonl`` and ``out/stats.json``."""
    bench = benchmark_keys()
    train, tstats = build(TRAIN_MODULES, benchmark=bench, seed=seed, per_function=per_function)
    val, vstats = build(VALIDATION_MODULES, benchmark=bench, exclude=tstats["keys"], seed=seed + 1,
                        per_function=per_function)
    check_no_leak([*train, *val], bench)
    out.mkdir(parents=True, exist_ok=True)
    for name, rows in (("train", train), ("val", val)):
        with (out / f"{name}.jsonl").open("w", encoding="utf-8") as f:
            for r in rows:
                f.write(json.dumps(r) + "\n")
    stats = {"stdlib": str(stdlib_dir()), "seed": seed, "per_function": per_function,
             "benchmark_functions": len(bench), "kinds": list(KINDS),
             "train": {"modules": list(TRAIN_MODULES), **{k: v for k, v in tstats.items() if k != "keys"}},
             "val": {"modules": list(VALIDATION_MODULES), **{k: v for k, v in vstats.items() if k != "keys"}}}
    (out / "stats.json").write_text(json.dumps(stats, indent=2) + "\n")
    return stats


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m agentkit.training.repair_data", description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--per-function", type=int, default=SITES_PER_FUNCTION)
    a = ap.parse_args(argv)
    stats = make(Path(a.out), a.seed, a.per_function)
    print(json.dumps({k: {kk: vv for kk, vv in v.items() if kk != "modules"} if isinstance(v, dict) else v
                      for k, v in stats.items()}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
