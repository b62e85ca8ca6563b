"""Synthetic agent-loop traces for the loop adapter (issue 31, item 4): what each step of a right run is sent, and
what it should write.

A trace is one run of the real SDK ``Agent`` (the agent-loop benchmark's instructions and loop) on a generated task,
with a :class:`TeacherGenerator` in place of the model (instructions: the benchmark's or three others): it answers every step as a right run would and records the
step's messages and that answer. So the examples carry exactly the prompts the loop builds (the decision's
``choice`` system text, the tool step's call head, the answer step's "Use this tool result ..." message), and
nothing is restated here.

Tasks come from :mod:`.specs` (generated functions: ``namespace.verb_noun`` names, typed parameters, request
sentences), never from a benchmark, in the benchmark's four kinds:

- ``one_tool``: the function and 0-2 distractors; the right call returns a result dict (several shapes: ``result``,
  ``value``, a key named after the function's noun) whose value the answer carries;
- ``no_tool``: the request states a fact and asks it back; the tools are offered and not called;
- ``two_tool``: one string argument is replaced by a saved-value reference that a lookup tool resolves (its name,
  the reference's form and the prompt's note drawn from lists that are not the benchmark's);
- ``fail_once``: the first call fails with a transient error (wordings not the benchmark's); the run calls again.

Recorded steps (``StepExample.step``): ``decide`` (the decision's chat and the call head; the target is the right
option's name and its closing quote, the tool or the no-call option), ``tool_call`` (the call, as the engine's
template writes it) and ``reply`` (one sentence that gives the value). ::

    python -m agentkit.training.loop_traces --n 3000 --out adapters/smollm2-135m-loop/traces.jsonl
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import random
import string
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ..engine.stats import DecodeStats, GenerationResult
from ..evals.agent_tasks import INSTRUCTIONS, AgentTask
from ..steps.kinds import call_text
from .specs import NAMESPACES, VARIED_PARAMS, GenFn, random_function, request

KINDS = ("one_tool", "no_tool", "two_tool", "fail_once")
WEIGHTS = (0.35, 0.2, 0.3, 0.15)
LOOKUPS = (  # (name, description, argument, reference maker, the prompt's note)
    ("fetch_saved_value", "Fetch the value stored under a saved key.", "key",
     lambda r: f"K{r.randint(100, 999)}", "{ref} is a saved key; fetch the value it stands for before anything else."),
    ("resolve_alias", "Resolve an alias to the value it stands for.", "alias",
     lambda r: f"@{r.choice(['alpha', 'beta', 'gamma', 'delta', 'sigma'])}{r.randint(1, 99)}",
     "{ref} is an alias: resolve it first."),
    ("get_stored_entry", "Get the stored entry for an id.", "entry_id",
     lambda r: f"E-{r.randint(10000, 99999)}", "(Entry {ref} holds the real value. Get it before calling anything else.)"),
)
FAILURES = ("Connection reset by the server; the request did not go through. Please try the same call again.",
            "Timeout after 30 s: no result. Retry the call unchanged.",
            "Rate limit hit (429). Nothing happened; repeat the call.")
SYSTEMS = (INSTRUCTIONS, None, "You help users with their requests. Use a tool when you need one.",
           "You are an assistant with tools. Answer briefly.")  # the run's instructions (None: the SDK's default)
FACTS = (("My parking spot is {v}.", "Which parking spot is mine?"),
         ("The invoice number on the letter is {v}.", "What was the invoice number?"),
         ("I wrote down the gate code as {v}.", "Remind me of the gate code."),
         ("Our team's project key is {v}.", "What is our project key?"),
         ("The serial number of my bike is {v}.", "Tell me the serial number of my bike."))
ANSWERS = ("The {noun} is {v}.", "The result is {v}.", "Done: the {noun} comes out as {v}.", "{v} is the {noun}.",
           "The {noun} you asked for is {v}.", "I got {v} for the {noun}.")
FACT_ANSWERS = ("It is {v}.", "{v}.", "You told me {v}.", "The answer is {v}.")


def value_text(r: random.Random) -> Any:
    """A result's value: a code, a number, or a short phrase (formats unlike the benchmark's ``WORD-NNNN``)."""
    kind = r.randrange(5)
    if kind == 0:
        return r.randint(2, 99999)
    if kind == 1:
        return round(r.uniform(0.1, 9999), r.choice([1, 2, 3]))
    if kind == 2:
        return "".join(r.choice(string.ascii_uppercase) for _ in range(3)) + str(r.randint(10, 999))
    if kind == 3:
        return f"{r.choice(['north', 'blue', 'silver', 'quiet', 'red'])} {r.choice(['harbor', 'falcon', 'lantern', 'meadow'])}"
    return f"{r.randint(1, 28)}/{r.randint(1, 12)}/{r.randint(1990, 2030)}"


def namespaced_function(r: random.Random) -> GenFn:
    """A generated function whose name always has a ``namespace.`` prefix: no such name is a benchmark function's
    (``tests/training/test_loop_traces.py`` checks it against ``shared/data/bfcl``; a bare ``calculate_area`` is)."""
    fn = random_function(r, VARIED_PARAMS)
    return fn if "." in fn.name else dataclasses.replace(fn, name=f"{r.choice(NAMESPACES)}.{fn.name}")


def bfcl_function(fn: GenFn) -> dict[str, Any]:
    schema = fn.schema()
    return {"name": fn.name, "description": fn.description,
            "parameters": {"type": "dict", "properties": schema["properties"], "required": schema["required"]}}


def _functions(r: random.Random, fn: GenFn, extra: list[dict[str, Any]] | None = None) -> list[dict[str, Any]]:
    others: list[GenFn] = []
    while len(others) < r.randint(0, 2):
        g = namespaced_function(r)
        if g.name != fn.name and all(g.name != o.name for o in others):
            others.append(g)
    fns = [bfcl_function(g) for g in [fn, *others]]
    r.shuffle(fns)
    return [*(extra or []), *fns] if r.random() < 0.5 else [*fns, *(extra or [])]


def _result(r: random.Random, fn: GenFn, v: Any) -> dict[str, Any]:
    return r.choice([{"status": "ok", "result": v}, {"value": v}, {fn.noun: v, "status": "done"}, {"result": v}])


def make_task(r: random.Random, i: int, kind: str) -> AgentTask | None:
    """One training task of ``kind`` (None when the drawn function cannot make one, e.g. two_tool without a
    string argument)."""
    fn = namespaced_function(r)
    values = {p.name: p.value(r) for p in fn.params if p.required or r.random() < 0.5}
    prompt = request(fn, values, r)
    expected = [{fn.name: {k: [v] for k, v in values.items()}}]
    v = value_text(r)
    if kind == "no_tool":
        statement, question = r.choice(FACTS)
        return AgentTask(id=f"trace-{i}", kind=kind, source="specs", prompt=f"{statement.format(v=v)} {question}",
                         functions=_functions(r, fn), answer_value=str(v))
    if kind == "two_tool":
        strs = [k for k, x in values.items() if isinstance(x, str) and len(x) >= 3 and prompt.count(x) == 1]
        if not strs:
            return None
        arg = r.choice(strs)
        name, desc, key, ref_of, note = r.choice(LOOKUPS)
        ref = ref_of(r)
        lookup = {"name": name, "description": desc,
                  "parameters": {"type": "dict", "properties": {key: {"type": "string", "description": "The " + key}},
                                 "required": [key]}}
        return AgentTask(id=f"trace-{i}", kind=kind, source="specs",
                         prompt=prompt.replace(values[arg], ref) + " " + note.format(ref=ref),
                         functions=_functions(r, fn, [lookup]), expected=[{name: {key: [ref]}}, *expected],
                         result=_result(r, fn, v), answer_value=str(v),
                         lookup={"ref": ref, "value": values[arg], "key": key})
    return AgentTask(id=f"trace-{i}", kind=kind, source="specs", prompt=prompt, functions=_functions(r, fn),
                     expected=expected, result=_result(r, fn, v), answer_value=str(v))


@dataclass
class TraceEnv:
    """A training task's tools: the right call gets the result, the lookup its value, a ``fail_once`` task's first
    call an error; anything else a neutral result."""

    task: AgentTask
    failure: str = FAILURES[0]
    calls: list[tuple[str, dict[str, Any], str]] = field(default_factory=list)

    def call(self, name: str, args: dict[str, Any]) -> dict[str, Any]:
        t = self.task
        if t.kind == "fail_once" and not self.calls:
            self.calls.append((name, args, "failed"))
            raise RuntimeError(self.failure)
        want = self.next_call()
        if want is not None and want[0] == name and want[1] == args:
            if t.lookup is not None and name == next(iter(t.expected[0])):
                self.calls.append((name, args, "lookup"))
                return {t.lookup["key"]: t.lookup["ref"], "value": t.lookup["value"]}
            self.calls.append((name, args, "result"))
            return dict(t.result or {})
        self.calls.append((name, args, "neutral"))
        return {"status": "ok", "result": "nothing found"}

    def next_call(self) -> tuple[str, dict[str, Any]] | None:
        """The call a right run makes next (None: it answers)."""
        done = sum(1 for *_, o in self.calls if o in ("lookup", "result"))
        if done >= len(self.task.expected):
            return None
        (name, args), = self.task.expected[done].items()
        return name, {k: v[0] for k, v in args.items()}


@dataclass
class StepExample:
    step: str
    messages: list[dict[str, str]]
    prefix: str  # the assistant text before the target (not trained on): the call head of a decision
    target: str
    task: str
    kind: str


class TeacherGenerator:
    """A ``Generator`` and ``NameScorer`` that answers every step as a right run of ``env``'s task would, and records
    each step (the calibration baseline's scoring is answered flat and not recorded)."""

    can_score = True

    def __init__(self, env: TraceEnv, r: random.Random) -> None:
        self.env, self.r, self.examples = env, r, []

    def _add(self, step: str, messages: list[dict[str, str]], target: str, prefix: str = "") -> None:
        t = self.env.task
        self.examples.append(StepExample(step, [dict(m) for m in messages], prefix, target, t.id, t.kind))

    async def name_scores(self, messages: list[dict[str, str]], names: list[str], head: str) -> dict[str, float]:
        if messages[-1]["content"] == "N/A":  # decide.NULL_QUESTION: the calibration baseline
            return {n: 0.0 for n in names}
        want = self.env.next_call()
        tools = set(self.env.task.tool_names)
        right = want[0] if want is not None else next((n for n in names if n not in tools), None)
        if right is None or right not in names:
            raise RuntimeError(f"teacher: the right option {right!r} is not among {names}")
        self._add("decide", messages, right + '"', prefix=head)
        return {n: 0.0 if n == right else -20.0 for n in names}

    async def generate(self, messages: list[dict[str, str]], config: Any, template: Any = None,
                       on_draft: Any = None) -> GenerationResult:
        step = template.meta.get("step") if template is not None else "reply"
        value = None
        if step == "tool_call":
            want = self.env.next_call()
            if want is None:
                raise RuntimeError("teacher: a tool step after the last right call")
            value = {"name": want[0], "arguments": want[1]}
            text = call_text(*want)
        elif step == "reply":
            t = self.env.task
            noun = next(iter(t.expected[-1])).rsplit("_", 1)[-1] if t.expected else ""
            pool = FACT_ANSWERS if t.kind == "no_tool" else ANSWERS
            text = self.r.choice(pool).format(v=t.answer_value, noun=noun.replace(".", " "))
        else:
            raise RuntimeError(f"teacher: no right output for step {step!r}")
        self._add(step, messages, text)
        return GenerationResult(text=text, token_ids=[], stats=DecodeStats(mode="teacher"), value=value)


def trace(task: AgentTask, r: random.Random) -> list[StepExample]:
    """The recorded steps of a right run of ``task`` through the SDK ``Agent`` (instructions drawn from
    :data:`SYSTEMS`, the benchmark's among them; the decisions' after-result rule ``null``, so each decision is
    scored on its own chat; grounded arguments off, so every decision is the teacher's: the rules that grounding
    brings, such as a served request's answer, are the agent's at run time, not steps to learn)."""
    from ..evals.agent_env import agentkit_tools
    from ..sdk import Agent, Limits

    env = TraceEnv(task, failure=r.choice(FAILURES))
    teacher = TeacherGenerator(env, r)
    agent = Agent(teacher, tools=agentkit_tools(task, env), instructions=r.choice(SYSTEMS), name="trace",
                  limits=Limits(max_iterations=6), after_result="null", model_settings={"grounded_arguments": False})
    out = asyncio.run(agent.run(task.prompt)).output
    if str(task.answer_value) not in str(out):
        raise RuntimeError(f"teacher run of {task.id} did not end with its value: {out!r}")
    return teacher.examples


def generate(n: int, seed: int = 0) -> list[StepExample]:
    """Examples from ``n`` tasks (kinds drawn by :data:`WEIGHTS`), deterministic for ``(n, seed)``."""
    r = random.Random(seed)
    out: list[StepExample] = []
    i = 0
    while i < n:
        task = make_task(r, i, r.choices(KINDS, WEIGHTS)[0])
        if task is None:
            continue
        out.extend(trace(task, r))
        i += 1
    return out


def calibration_chats(n: int, seed: int) -> list[list[dict[str, str]]]:
    """Per task of :func:`generate` ``(n, seed)``, its last step's chat with the right output as the assistant's
    message: agent-loop text for fitting a merged LoRA's 4-bit grids (``agentkit/models/gptq.py``)."""
    last: dict[str, StepExample] = {}
    for ex in generate(n, seed):
        last[ex.task] = ex
    return [[*ex.messages, {"role": "assistant", "content": ex.prefix + ex.target}] for ex in last.values()]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m agentkit.training.loop_traces", description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=3000, help="tasks to trace")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", required=True, help="JSONL file of examples")
    ap.add_argument("--calibration", action="store_true",
                    help="write one chat per task (the last step and its output), as agentkit/models/data/"
                         "loop_calibration.jsonl holds (--n 48 --seed 1)")
    a = ap.parse_args(argv)
    path = Path(a.out)
    path.parent.mkdir(parents=True, exist_ok=True)
    if a.calibration:
        chats = calibration_chats(a.n, a.seed)
        path.write_text("".join(json.dumps(c, ensure_ascii=False) + "\n" for c in chats), encoding="utf-8")
        print(f"{len(chats)} chats from {a.n} tasks -> {path}")
        return 0
    examples = generate(a.n, a.seed)
    path.write_text("".join(json.dumps(asdict(e), ensure_ascii=False) + "\n" for e in examples), encoding="utf-8")
    steps = {s: sum(e.step == s for e in examples) for s in ("decide", "tool_call", "reply")}
    print(f"{len(examples)} examples from {a.n} tasks ({steps}) -> {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
