"""The repair benchmark's tasks: one-line bugs made by the mutation operators in small programs.

The programs (``evals/repair_tasks/programs_*.py``: a module of plain functions and its pytest file each) are
written for this benchmark and used nowhere in training. :func:`build_tasks` mutates every line of every function,
then picks mutants round-robin over the operator kinds (so kinds are balanced), at most ``per_program`` per
program, keeping only those whose tests fail with the bug, finish within the time limit, and pass with the
reference fix (the original line). The tasks are written to ``evals/repair_tasks/tasks.json`` once
(``python -m agentkit.evals.repair_tasks``) and read from there.

The held-out split is by program (``crc32(name) % 3 == 0``): its programs were not looked at while tuning the
repair loop, and it is reported apart.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import random
import sys
import tempfile
import zlib
from collections import defaultdict
from pathlib import Path
from typing import Any

from ..repair.mutate import KINDS, LineEdit, apply_line, function_mutants

REPO = Path(__file__).resolve().parents[2]
DATA = REPO / "evals" / "repair_tasks"
TASKS_FILE = DATA / "tasks.json"


def load_programs(data: Path = DATA) -> list[dict[str, str]]:
    """Every program of ``data/programs_*.py``, in file then list order."""
    out: list[dict[str, str]] = []
    for path in sorted(data.glob("programs_*.py")):
        spec = importlib.util.spec_from_file_location(path.stem, path)
        module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
        spec.loader.exec_module(module)  # type: ignore[union-attr]
        out += module.PROGRAMS
    return out


def split_of(name: str) -> str:
    return "heldout" if zlib.crc32(name.encode()) % 3 == 0 else "dev"


def program_files(program: dict[str, str], module: str | None = None) -> dict[str, str]:
    """The repository of ``program`` (``module``: its module text, default the correct one)."""
    return {f"{program['name']}.py": module if module is not None else program["module"],
            f"test_{program['name']}.py": program["tests"]}


def task_files(task: dict[str, Any], programs: dict[str, dict[str, str]]) -> dict[str, str]:
    """The buggy repository of ``task``."""
    prog = programs[task["program"]]
    edit = LineEdit(task["line"], task["buggy"], task["kind"])
    return program_files(prog, apply_line(prog["module"], edit))


def write_files(files: dict[str, str], root: Path) -> None:
    for rel, text in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text, encoding="utf-8")


def outcome(files: dict[str, str], time_limit_s: float) -> tuple[bool, bool]:
    """(tests pass, timed out) for a repository."""
    from agentkit.tools.workspace import Workspace

    from ..repair.failures import run_tests

    with tempfile.TemporaryDirectory(prefix="repair-task-") as tmp:
        write_files(files, Path(tmp))
        rep = run_tests(Workspace(tmp, command_timeout_s=time_limit_s))
    return rep.ok, rep.timed_out


def _mutants(program: dict[str, str]) -> list[LineEdit]:
    import ast

    tree = ast.parse(program["module"])
    names = [n.name for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name != "__init__"]
    seen: set[tuple[int, str]] = set()
    out = []
    for name in names:
        for m in function_mutants(program["module"], name):
            if (m.line, m.text) not in seen:
                seen.add((m.line, m.text))
                out.append(m)
    return out


def build_tasks(programs: list[dict[str, str]], *, per_program: int = 4, seed: int = 0,
                time_limit_s: float = 5.0, verbose: bool = False) -> list[dict[str, Any]]:
    """Verified, kind-balanced one-line bugs (see the module docstring)."""
    rng = random.Random(seed)
    pools: dict[str, list[tuple[dict[str, str], LineEdit]]] = defaultdict(list)
    for prog in programs:
        ok, _ = outcome(program_files(prog), time_limit_s)
        if not ok:
            raise ValueError(f"program {prog['name']!r}: its tests fail without a bug")
        for m in _mutants(prog):
            pools[m.kind].append((prog, m))
    for pool in pools.values():
        rng.shuffle(pool)
    used: dict[str, int] = defaultdict(int)
    tasks: list[dict[str, Any]] = []
    while any(pools.values()):
        for kind in KINDS:
            while pools[kind]:
                prog, m = pools[kind].pop()
                if used[prog["name"]] >= per_program:
                    continue
                ok, timed_out = outcome(program_files(prog, apply_line(prog["module"], m)), time_limit_s)
                if ok or timed_out:
                    continue
                used[prog["name"]] += 1
                original = prog["module"].splitlines()[m.line - 1]
                tasks.append({"id": f"{prog['name']}-{len(tasks)}", "program": prog["name"],
                              "split": split_of(prog["name"]), "kind": kind, "path": f"{prog['name']}.py",
                              "line": m.line, "buggy": m.text, "fixed": original})
                if verbose:
                    print(f"[{len(tasks)}] {kind:11} {prog['name']}:{m.line}  {m.text.strip()}", file=sys.stderr)
                break
    return tasks


def load_tasks(path: Path = TASKS_FILE) -> list[dict[str, Any]]:
    if not path.is_file():
        raise FileNotFoundError(f"no repair tasks at {path}; build them with python -m agentkit.evals.repair_tasks")
    return json.loads(path.read_text(encoding="utf-8"))["tasks"]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m agentkit.evals.repair_tasks", description=__doc__.split("\n\n")[0])
    ap.add_argument("--per-program", type=int, default=4)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default=str(TASKS_FILE))
    args = ap.parse_args(argv)
    programs = load_programs()
    tasks = build_tasks(programs, per_program=args.per_program, seed=args.seed, verbose=True)
    by_kind: dict[str, int] = defaultdict(int)
    for t in tasks:
        by_kind[t["kind"]] += 1
    meta = {"programs": len(programs), "per_program": args.per_program, "seed": args.seed, "n": len(tasks),
            "by_kind": dict(by_kind), "heldout": sum(t["split"] == "heldout" for t in tasks)}
    Path(args.out).write_text(json.dumps({"meta": meta, "tasks": tasks}, indent=1) + "\n", encoding="utf-8")
    print(json.dumps(meta))
    return 0


if __name__ == "__main__":
    sys.exit(main())
