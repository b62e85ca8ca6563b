"""The agent-loop benchmark's tasks: a seeded generator from a BFCL-format directory, and the task file.

Every task is one user prompt, a set of tools (BFCL function definitions) and what a right run looks like. Four kinds:

- ``one_tool``: the BFCL item's functions as tools and its question. The ground-truth call returns a canned result,
  ``{"status": "ok", "result": CODE}``; a right run calls it and answers with CODE.
- ``no_tool``: the prompt states a fact (``... the access code is CODE. What is the access code?``) and asks for it
  back; an unrelated item's functions are still offered. A right run answers with CODE and calls no tool.
- ``two_tool``: the item's question with one string argument's value replaced by a reference (``R-1234``, and a
  note that it is one to look up), and a synthesised ``lookup_reference(ref)`` tool whose result,
  ``{"ref": "R-1234", "value": VALUE}``, carries that value; a right run calls the lookup, then the item's function
  with VALUE, and answers with the second call's CODE.
- ``fail_once``: as ``one_tool``, but the first call of any of the item's tools fails with a clear error (nothing was
  done, call again); a right run calls again and answers with CODE.

CODE (``WORD-NNNN``) is derived by hashing the ground-truth call (and the task kind), never from an answer text, so
a model cannot guess it and it does not occur in the prompt. ``expected`` (the ground-truth calls, in BFCL's
``possible_answer`` format) is read only by the tool environment (:mod:`agentkit.evals.agent_env`: which call gets
the canned result) and by scoring; the agent sees only ``prompt`` and the tools.

The generator is deterministic for a ``(data, seed, counts)``: items are read in :func:`~agentkit.evals.bfcl.load_bfcl`
order, shuffled with ``random.Random(seed)``, and dealt to the kinds in turn (each item used at most once; an item a
kind cannot use is left for the others). The committed set, ``evals/agent_loop/tasks.jsonl``, is::

    python -m agentkit.evals.agent_tasks --data evals/data/bfcl --out evals/agent_loop/tasks.jsonl
"""

from __future__ import annotations

import argparse
import hashlib
import json
import keyword
import random
import re
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ..errors import UserError
from .bfcl import BfclItem, load_bfcl

KINDS: tuple[str, ...] = ("one_tool", "no_tool", "two_tool", "fail_once")
DEFAULT_COUNTS: dict[str, int] = {"one_tool": 50, "no_tool": 35, "two_tool": 40, "fail_once": 35}  # 160 tasks
TASKS_FILE = "tasks.jsonl"
LOOKUP = "lookup_reference"
LOOKUP_FUNCTION: dict[str, Any] = {
    "name": LOOKUP,
    "description": "Look up the value saved under a reference such as R-1234.",
    "parameters": {"type": "dict", "properties": {"ref": {"type": "string", "description": "The reference, e.g. R-1234."}},
                   "required": ["ref"]},
}
FAIL_MESSAGE = ("Service temporarily unavailable (HTTP 503): nothing was done. "
                "Call the tool again with the same arguments.")
INSTRUCTIONS = ("Answer the user's request. Call a tool when you need information you do not have, then answer in "
                "one short sentence that gives the result.")
_WORDS = ("AMBER", "BIRCH", "CEDAR", "DELTA", "EMBER", "FJORD", "GARNET", "HAZEL", "INDIGO", "JASPER", "KESTREL",
          "LUPIN", "MAPLE", "NECTAR", "OPAL", "PEBBLE", "QUARTZ", "RAVEN", "SAFFRON", "TUNDRA", "UMBER", "VIOLET",
          "WILLOW", "XENON", "YARROW", "ZEPHYR")
_FACTS = (  # (statement, question) about a CODE, for no_tool tasks
    ("My locker number is {v}.", "What is my locker number?"),
    ("The access code for the lab is {v}.", "Tell me the access code for the lab."),
    ("Our parcel tracking ID is {v}.", "What is our parcel tracking ID?"),
    ("The booking reference for my trip is {v}.", "Repeat my booking reference."),
    ("The Wi-Fi password in the office is {v}.", "What is the Wi-Fi password in the office?"),
    ("My library card number is {v}.", "Which library card number did I give you?"),
)


@dataclass
class AgentTask:
    """One benchmark task. ``functions``: BFCL function definitions offered as tools (the lookup among them for
    ``two_tool``); ``expected``: the ground-truth calls in order (``[{FUNCTION: {ARG: [allowed...]}}]``), read by
    the tool environment and scoring only; ``result``: what the item's right call returns (None for ``no_tool``);
    ``answer_value``: the value a right final answer carries."""

    id: str
    kind: str
    source: str  # the BFCL item id
    prompt: str
    functions: list[dict[str, Any]]
    expected: list[dict[str, dict[str, list]]] = field(default_factory=list)
    result: dict[str, Any] | None = None
    answer_value: str = ""
    lookup: dict[str, Any] | None = None  # two_tool: {"ref": ..., "value": ...}

    @property
    def tool_names(self) -> list[str]:
        return [f["name"] for f in self.functions]

    def to_json(self) -> str:
        return json.dumps(asdict(self), ensure_ascii=False, sort_keys=False)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> AgentTask:
        if d.get("kind") not in KINDS:
            raise UserError(f"task {d.get('id')!r}: kind {d.get('kind')!r} is not one of {KINDS}")
        return cls(**{k: d[k] for k in cls.__dataclass_fields__ if k in d})


# -- derived values ---------------------------------------------------------------------------------------------


def code_for(*parts: Any) -> str:
    """A ``WORD-NNNN`` code from a hash of ``parts`` (a call, a task id): stable across runs and machines."""
    h = hashlib.sha256(json.dumps(parts, sort_keys=True, ensure_ascii=False, default=str).encode()).digest()
    return f"{_WORDS[h[0] % len(_WORDS)]}-{1000 + int.from_bytes(h[1:4], 'big') % 9000}"


def _usable(item: BfclItem) -> bool:
    """A single expected call to one of the candidates, whose parameter names are Python identifiers."""
    if len(item.ground_truth) != 1:
        return False
    (name, _), = item.ground_truth[0].items()
    if name not in item.names or name == LOOKUP:
        return False
    for fn in item.functions:
        props = (fn.get("parameters") or {}).get("properties") or {}
        if any(not p.isidentifier() or keyword.iskeyword(p) for p in props):
            return False
    return True


def _question(item: BfclItem) -> str:
    users = [m["content"] for m in item.messages if m.get("role") == "user"]
    return users[-1] if users else ""


def _reference_arg(item: BfclItem) -> tuple[str, str] | None:
    """(argument, value) of the first ground-truth string argument whose value occurs once in the question
    (case-insensitive, at word boundaries, at least 3 characters): the value a lookup can stand in for."""
    q = _question(item)
    (name, args), = item.ground_truth[0].items()
    fn = next(f for f in item.functions if f["name"] == name)
    required = set((fn.get("parameters") or {}).get("required") or [])
    for arg in sorted(args, key=lambda a: (a not in required, a)):
        value = next((v for v in args[arg] if v != ""), None)
        if not isinstance(value, str) or len(value) < 3:
            continue
        hits = list(re.finditer(rf"(?<!\w){re.escape(value)}(?!\w)", q, flags=re.IGNORECASE))
        if len(hits) == 1:
            return arg, hits[0].group(0)
    return None


# -- one task per kind ------------------------------------------------------------------------------------------


def _call_task(item: BfclItem, kind: str) -> AgentTask:
    code = code_for(kind, item.ground_truth[0])
    return AgentTask(id=f"{kind}-{item.id}", kind=kind, source=item.id, prompt=_question(item),
                     functions=item.functions, expected=list(item.ground_truth),
                     result={"status": "ok", "result": code}, answer_value=code)


def _no_tool_task(item: BfclItem, rng: random.Random) -> AgentTask:
    code = code_for("no_tool", item.id)
    statement, question = rng.choice(_FACTS)
    return AgentTask(id=f"no_tool-{item.id}", kind="no_tool", source=item.id,
                     prompt=f"{statement.format(v=code)} {question}", functions=item.functions, expected=[],
                     result=None, answer_value=code)


def _two_tool_task(item: BfclItem) -> AgentTask | None:
    found = _reference_arg(item)
    if found is None:
        return None
    _, written = found
    q = _question(item)
    ref = "R-" + code_for("ref", item.id).split("-")[1]
    prompt = (re.sub(rf"(?<!\w){re.escape(written)}(?!\w)", ref, q, count=1, flags=re.IGNORECASE)
              + f" ({ref} is a saved reference: look up its value first.)")
    code = code_for("two_tool", item.ground_truth[0])
    return AgentTask(id=f"two_tool-{item.id}", kind="two_tool", source=item.id, prompt=prompt,
                     functions=[LOOKUP_FUNCTION, *item.functions],
                     expected=[{LOOKUP: {"ref": [ref]}}, *item.ground_truth],
                     result={"status": "ok", "result": code}, answer_value=code,
                     lookup={"ref": ref, "value": written})


def generate(data: str | Path, seed: int = 0, counts: dict[str, int] | None = None) -> list[AgentTask]:
    """Tasks from the BFCL-format directory ``data``: ``counts[kind]`` of each kind (default
    :data:`DEFAULT_COUNTS`), fewer when the directory has too few usable items. Deterministic for its inputs."""
    counts = dict(DEFAULT_COUNTS if counts is None else counts)
    bad = [k for k in counts if k not in KINDS]
    if bad:
        raise UserError(f"unknown task kind(s) {bad}; the kinds are {', '.join(KINDS)}")
    items = [it for it in load_bfcl(Path(data)) if _usable(it)]
    rng = random.Random(seed)
    rng.shuffle(items)
    tasks: dict[str, list[AgentTask]] = {k: [] for k in KINDS}
    pending = [k for k in KINDS if counts.get(k, 0) > 0]
    turn = 0
    for item in items:
        if not pending:
            break
        start = turn % len(pending)
        for kind in pending[start:] + pending[:start]:  # the first kind, in turn, that can use this item takes it
            task = _make(item, kind, rng)
            if task is None:
                continue
            tasks[kind].append(task)
            if len(tasks[kind]) >= counts[kind]:
                pending.remove(kind)
            turn += 1
            break
    return [t for k in KINDS for t in tasks[k]]


def _make(item: BfclItem, kind: str, rng: random.Random) -> AgentTask | None:
    if kind == "no_tool":
        return _no_tool_task(item, rng)
    if kind == "two_tool":
        return _two_tool_task(item)
    return _call_task(item, kind)


# -- the task file ------------------------------------------------------------------------------------------------


def save(tasks: list[AgentTask], path: str | Path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(t.to_json() + "\n" for t in tasks), encoding="utf-8")
    return path


def load(path: str | Path, *, kinds: list[str] | None = None, limit: int | None = None,
         seed: int = 0) -> list[AgentTask]:
    """Tasks from a task file (or a folder holding ``tasks.jsonl``), or generated from a BFCL-format folder (one
    with ``BFCL_*.json`` files) with ``seed``. ``kinds``: keep only these; ``limit``: at most N tasks, dealt
    round-robin over the kinds so a short run sees every kind."""
    path = Path(path)
    if kinds:
        bad = [k for k in kinds if k not in KINDS]
        if bad:
            raise UserError(f"unknown task kind(s) {bad}; the kinds are {', '.join(KINDS)}")
    file = path / TASKS_FILE if path.is_dir() else path
    if file.is_file():
        tasks = [AgentTask.from_dict(json.loads(line)) for line in file.read_text(encoding="utf-8").splitlines()
                 if line.strip()]
    elif path.is_dir() and any(path.glob("BFCL_*.json")):
        tasks = generate(path, seed)
    else:
        raise UserError(f"--data {str(path)!r}: neither a task file ({TASKS_FILE}) nor a BFCL-format folder")
    if kinds:
        tasks = [t for t in tasks if t.kind in kinds]
    return _interleave(tasks, limit)


def _interleave(tasks: list[AgentTask], limit: int | None) -> list[AgentTask]:
    by_kind = [[t for t in tasks if t.kind == k] for k in KINDS]
    out = [g[i] for i in range(max((len(g) for g in by_kind), default=0)) for g in by_kind if i < len(g)]
    return out[:limit] if limit is not None else out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m agentkit.evals.agent_tasks", description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", required=True, help="BFCL-format folder (BFCL_v4_*.json and possible_answer/)")
    ap.add_argument("--out", required=True, help="task file to write (JSON lines)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--counts", default="", help="KIND=N,... (default: " +
                    ",".join(f"{k}={n}" for k, n in DEFAULT_COUNTS.items()) + ")")
    args = ap.parse_args(argv)
    counts = None
    if args.counts:
        counts = {k: int(n) for k, n in (kv.split("=") for kv in args.counts.split(","))}
    tasks = generate(args.data, args.seed, counts)
    save(tasks, args.out)
    per = {k: sum(t.kind == k for t in tasks) for k in KINDS}
    print(f"{len(tasks)} tasks -> {args.out} ({', '.join(f'{k} {n}' for k, n in per.items())})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
