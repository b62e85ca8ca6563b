"""Self-distillation data: the base model's own greedy ar-constrained outputs under the engine's templates.

The first adapter learned the generator's canonical answers (``data.py``), which are not what the base model writes:
its drafts then disagree with the base exactly where a verifier checks them, and its diffusion outputs are a
different distribution. Here every target is what ``Engine.generate(mode="ar")`` writes, token for token, under the
template the engine itself would use: the compiler's JSON style (recorded as ``style`` in each record), BFCL-style
call templates, pydantic extraction models, SEARCH/REPLACE edit templates, and no template for free-text replies.

Jobs (prompt + template) come from the project's own generators, never from benchmark data:

- ``call``: procedurally generated functions (``specs.VARIED_PARAMS``: free strings copied from the request, enums,
  arrays, nested objects, optional parameters), prompted as ``agentkit.evals.bfcl`` prompts, under the engine's
  call template (``toolcall.call_template``: the name a choice among the listed functions);
- ``extract``: pydantic models with 5-9 fields (some optional, some absent from the text), prompted as the SDK's
  ``extract`` and as the CLI's bare ``generate "Extract: ..." --schema`` request;
- ``edit``: a small generated Python file and an instruction, under ``constrain.edits.search_replace_template``;
- ``free``: chat questions with no template (the model's free-text style).

Consistency targets (CLLM): with ``states``, the current adapter decodes the same job in diffusion mode and its
first block's canvas states (masks and provisional tokens) are kept with the record; ``recipe.make_row`` then
trains the map from such a state to the ar-constrained answer.
"""

from __future__ import annotations

import hashlib
import json
import random
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

from ..constrain.nodes import Template
from .data import DISTILL_PROMPTS, TOOL_SYSTEM, Tokenized
from .specs import FIRST, LAST, TEXT_POOLS, VARIED_PARAMS, VERBS, WORDS, random_function, request

EXTRACT_INSTRUCTIONS = "Extract the information the schema asks for from the user's text. Answer with JSON only."
EDIT_SYSTEM = ("You edit code. Answer with one SEARCH/REPLACE block: the file path, a line `<<<<<<< SEARCH`, lines "
               "copied exactly from the file, a line `=======`, the new lines, a line `>>>>>>> REPLACE`.")
FREE_PROMPTS = DISTILL_PROMPTS + [
    "What is a good name for a pet fish?", "Explain recursion to a child.", "List three fruits.",
    "What does a database do?", "Write one sentence about the ocean.", "How many days are in a week?",
    "Why do we use version control?", "Give me a tip for writing clear emails.",
]


@dataclass
class DistillJob:
    """One prompt to distil: chat ``messages`` and the ``template`` the engine decodes under (None: free text)."""

    kind: str  # call | extract | edit | free
    messages: list[dict[str, str]]
    template: Template | None = None


@dataclass
class Record:
    """The base model's greedy ar-constrained answer to a job, as token ids (answer ends with EOS)."""

    kind: str
    prompt: list[int]
    answer: list[int]
    pinned: list[bool]
    text: str
    style: str
    states: list[list[int]] = field(default_factory=list)  # diffusion canvas states of the first block
    state_start: int = 0  # answer position where those states begin (after the prefill's pinned text)

    def tokenized(self) -> Tokenized:
        return Tokenized(self.prompt, self.answer, self.pinned, states=self.states, state_start=self.state_start)


# -- jobs ---------------------------------------------------------------------------------------------------------

def call_job(r: random.Random, style: str | None, params: list | None = None) -> DistillJob:
    from ..toolcall import call_template

    bank = params or VARIED_PARAMS
    fn = random_function(r, bank)
    values = {p.name: p.value(r) for p in fn.params if p.required or r.random() < 0.5}
    fns = [fn] + [random_function(r, bank) for _ in range(r.randint(0, 2))]
    r.shuffle(fns)
    listing = "\n".join(json.dumps({"name": f.name, "description": f.description, "parameters": f.schema()})
                        for f in fns)
    system = TOOL_SYSTEM.format(s="s" if len(fns) > 1 else "", functions=listing)
    # the engine's call template (as BFCL's): the function name is a choice among the listed ones
    tpl = call_template([(f.name, f.schema()) for f in fns], style=style)
    msgs = [{"role": "system", "content": system}, {"role": "user", "content": request(fn, values, r)}]
    return DistillJob("call", msgs, tpl)


# (field, python type, phrase, value maker); the extraction bank
FIELDS: list[tuple[str, type, str, Callable[[random.Random], object]]] = [
    ("name", str, "{v}", TEXT_POOLS["person"]), ("age", int, "{v} years old", lambda r: r.randint(18, 90)),
    ("email", str, "email {v}", TEXT_POOLS["email"]), ("city", str, "lives in {v}",
                                                        lambda r: r.choice(["Lisbon", "Porto", "Oslo", "Lima", "Seoul"])),
    ("company", str, "works at {v}", lambda r: r.choice(["Acme", "Globex", "Hooli", "Initech", "Vandelay"])),
    ("job_title", str, "a {v}", lambda r: r.choice(["nurse", "data analyst", "pilot", "chef", "architect"])),
    ("phone", str, "phone {v}", TEXT_POOLS["phone"]), ("address", str, "at {v}", TEXT_POOLS["address"]),
    ("years_experience", int, "{v} years of experience", lambda r: r.randint(0, 40)),
    ("salary", float, "earns {v} a year", lambda r: float(r.randint(20, 200) * 1000)),
    ("is_remote", bool, "{v}", lambda r: r.random() < 0.5),
    ("skills", list[str], "skills: {v}", lambda r: r.sample(["python", "sql", "excel", "welding", "design"], 2)),
    ("team", str, "on the {v} team", lambda r: r.choice(WORDS).capitalize()),
]


def _say(name: str, phrase: str, v: object) -> str:
    if isinstance(v, bool):
        return "works remotely" if v else "works on site"
    if isinstance(v, list):
        v = " and ".join(map(str, v))
    return phrase.format(v=v)


def extract_job(r: random.Random, style: str | None, fields: list | None = None) -> DistillJob:
    from pydantic import create_model

    from ..constrain.compiler import compile_schema_uncached

    bank = fields or FIELDS
    picked = [bank[0]] + r.sample(bank[1:], min(len(bank) - 1, r.randint(4, 8)))
    optional = {f[0] for f in picked[1:] if r.random() < 0.35}
    spec = {n: ((t | None, None) if n in optional else (t, ...)) for n, t, _, _ in picked}
    model = create_model(f"{r.choice(['Person', 'Employee', 'Contact', 'Profile', 'Candidate'])}", **spec)
    values = {n: make(r) for n, _, _, make in picked if n not in optional or r.random() < 0.5}
    parts = [_say(n, ph, values[n]) for n, _, ph, _ in picked if n in values]
    text = parts[0] + ", " + ", ".join(parts[1:]) + "."
    tpl = compile_schema_uncached(model, style=style)
    if r.random() < 0.5:  # the SDK's extract()
        schema = json.dumps(model.model_json_schema(), separators=(",", ":"))
        msgs = [{"role": "system", "content": EXTRACT_INSTRUCTIONS},
                {"role": "user", "content": f"{text}\n\nAnswer with JSON matching this schema: {schema}"}]
    else:  # the CLI's `agentkit generate "Extract: ..." --schema FILE`
        msgs = [{"role": "user", "content": f"Extract: {text}"}]
    return DistillJob("extract", msgs, tpl)


def text_only(bank: list) -> list:
    """The entries of a parameter or field bank whose values are strings, booleans or enums (no numbers): cheap
    token automata on a byte-level toy vocabulary (tests)."""
    def ok(kind) -> bool:
        if isinstance(kind, str):
            return kind.startswith(("str:", "text:", "enum:", "strs:")) or kind == "bool"
        return kind in (str, bool)

    return [e for e in bank if ok(e[1])]


def _python_file(r: random.Random) -> tuple[str, list[str]]:
    names = r.sample(["total", "count", "price", "rate", "items", "result", "value", "limit"], 3)
    fn = f"{r.choice(VERBS)}_{r.choice(WORDS)}"
    lines = [f"def {fn}({names[0]}, {names[1]}):", f"    {names[2]} = {names[0]} * {r.randint(2, 9)}",
             f"    if {names[2]} > {r.randint(10, 99)}:", f"        {names[2]} = {names[2]} - {names[1]}",
             f"    return {names[2]}", "", f"print({fn}({r.randint(1, 9)}, {r.randint(1, 9)}))"]
    return "\n".join(lines) + "\n", names


def edit_job(r: random.Random, style: str | None = None) -> DistillJob:
    from ..constrain.edits import search_replace_template

    content, names = _python_file(r)
    path = f"{r.choice(WORDS)}.py"
    ask = r.choice([f"Rename the variable {names[2]} to {r.choice(WORDS)}_{names[2]}.",
                    f"Change the multiplier to {r.randint(10, 20)}.", "Make the function return 0 when the result is negative.",
                    f"Add a docstring to the function saying it uses {r.choice(FIRST)} {r.choice(LAST)}'s formula."])
    msgs = [{"role": "system", "content": EDIT_SYSTEM},
            {"role": "user", "content": f"{path}\n```\n{content}```\n\n{ask}"}]
    return DistillJob("edit", msgs, search_replace_template({path: content}, max_edits=1, max_search_lines=4,
                                                      max_replace_tokens=64))


def jobs(n_calls: int, n_extract: int, n_edits: int, n_free: int, seed: int, style: str | None, *,
         params: list | None = None, fields: list | None = None) -> list[DistillJob]:
    """The distillation jobs, deterministic in ``seed``; the free-text ones are the first ``n_free`` prompts.
    ``params`` / ``fields``: the parameter and extraction-field banks (default: all of them)."""
    r = random.Random(seed)
    out = [call_job(r, style, params) for _ in range(n_calls)]
    out += [extract_job(r, style, fields) for _ in range(n_extract)]
    out += [edit_job(r) for _ in range(n_edits)]
    out += [DistillJob("free", [{"role": "user", "content": p}]) for p in FREE_PROMPTS[:n_free]]
    return out


# -- running the base model -----------------------------------------------------------------------------------------

def pinned_flags(constraint, tokens: list[int]) -> list[bool]:
    """Which of ``tokens`` the template placed by itself (the constrained decoder's forced tokens)."""
    if constraint is None:
        return [False] * len(tokens)
    state, flags = constraint.start(), []
    for t in tokens:
        forced = constraint.forced(state)
        flags.append(bool(forced) and forced[0] == t)
        state = constraint.advance(state, t)
        assert state is not None, "a distilled answer left its own template"
    return flags


def distil_one(engine, job: DistillJob, max_new_tokens: int, adapter_engine=None) -> Record | None:
    """The ar-constrained greedy answer to ``job`` (None when it ran out of tokens: no clean target).
    ``adapter_engine``: also keep the first diffusion block's canvas states (consistency targets)."""
    from ..config import DecodeConfig
    from ..constrain.canonical import json_style

    res = engine.generate(job.messages, DecodeConfig(mode="ar", max_new_tokens=max_new_tokens),
                          template=job.template)
    if res.stats.finish_reason == "length":
        return None
    c = engine.constraint(job.template) if job.template is not None else None
    style = (job.template.meta.get("style") if job.template is not None else None) or json_style(None).name
    rec = Record(job.kind, engine.encode_prompt(job.messages), list(res.token_ids) + [engine.lm.eos_ids[0]],
                 pinned_flags(c, list(res.token_ids)) + [False], res.text, style)
    if adapter_engine is not None and job.template is not None:
        d = adapter_engine.generate(job.messages, DecodeConfig(mode="diffusion", max_new_tokens=max_new_tokens),
                                    template=job.template)
        if d.stats.steps_per_block:
            rec.states = [list(s) for s in d.drafts[: d.stats.steps_per_block[0]]]
            rec.state_start = len(c.forced(c.start())[:max_new_tokens]) if c is not None else 0
    return rec


def distil(engine, job_list: list[DistillJob], cache: Path | None = None, *, max_new_tokens: int = 160,
           adapter_engine=None, consistency_every: int = 3, log=print) -> list[Record]:
    """Records for ``job_list`` (index-aligned, skipping answers that ran out of tokens), cached as JSONL in
    ``cache``: a rerun reuses the cached prefix of the job list and distils only the rest."""
    done: list[dict] = []
    if cache is not None and cache.is_file():
        done = [json.loads(x) for x in cache.read_text().splitlines() if x.strip()]
    f = cache.open("a") if cache is not None else None
    out: list[Record] = []
    try:
        for i, job in enumerate(job_list):
            key = hashlib.md5(json.dumps(job.messages).encode()).hexdigest()
            if i < len(done) and done[i].get("key", key) == key:  # the same job as when it was cached
                rec = Record(**done[i]["record"]) if done[i]["record"] else None
            elif i < len(done):
                raise ValueError(f"{cache}: entry {i} was distilled from another job (other counts or seed); "
                                 "use another output directory or the same --sd-* arguments")
            else:
                states = adapter_engine if consistency_every and i % consistency_every == 0 else None
                rec = distil_one(engine, job, max_new_tokens, states)
                if f is not None:
                    f.write(json.dumps({"i": i, "key": key, "kind": job.kind, "record": asdict(rec) if rec else None})
                            + "\n")
                    f.flush()
                if log and (i + 1) % 25 == 0:
                    log(f"distilled {i + 1}/{len(job_list)}")
            if rec is not None:
                out.append(rec)
    finally:
        if f is not None:
            f.close()
    return out


def digest(records: list[Record]) -> str:
    """md5 of the records' prompts, answers and pinned flags (what training sees)."""
    return hashlib.md5(repr([(r.prompt, r.answer, r.pinned) for r in records]).encode()).hexdigest()


def split(records: list[Record], held_out: int) -> tuple[list[Record], list[Record]]:
    """(train, held-out): every ``len // held_out``-th record is held out (spread over the kinds)."""
    if held_out <= 0:
        return records, []
    step = max(1, len(records) // held_out)
    held = set(range(0, len(records), step)[:held_out])
    return [x for i, x in enumerate(records) if i not in held], [x for i, x in enumerate(records) if i in held]


