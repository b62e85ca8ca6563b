"""The eval runner: every mode on the same items, in one process, with one engine; JSON, a markdown table, plots.

Modes:

- ``ar-unconstrained``: greedy AR with no template (free text; the suite parses what it can out of it);
- ``ar-constrained``: AR under the template, pinned runs jumped forward in one forward -- the baseline;
- ``diffusion``: the template placed in a canvas and denoised, with the engine's block-diffusion adapter when it has
  one (the default model ships one), else as a causal canvas;
- ``diffusion-causal`` (not in the default set): diffusion mode with the adapter off -- the causal canvas on the base
  weights, which must reproduce greedy AR;
- ``verify``: canvas drafts checked by one causal pass per block (output equals greedy AR under the template).

Items run item-major (all modes of item 1, then all modes of item 2, ...) and the mode order rotates by one per item,
so machine noise and warm caches spread evenly over the modes. After every item the results so far are written to
``out`` (atomic replace, ``"partial": true``), so an interrupted run keeps what finished.

Suites: a :class:`Suite` (``load`` items, optional per-item ``prepare`` shared by the modes, ``run`` one item in one
mode -> a row) or a plain function that runs a whole suite itself; ``register_suite(name, suite_or_fn)``. A suite
that is not registered yet is looked up by importing ``agentkit.evals.<name>`` (which should call
``register_suite``). ``bfcl`` lives in :mod:`agentkit.evals.bfcl`; ``coverage`` dispatches to
``agentkit.constrain.coverage.run_coverage``; ``agent`` is a hook for the example agents' tasks.
"""

from __future__ import annotations

import importlib
import json
import random
import time
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from ..errors import UserError
from ..settings import BY_NAME, where
from .report import (
    environment,
    markdown_table,
    ratios,
    stats_dict,
    summarize,
    write_json_atomic,
)
from .timing import cold_prompts

# eval modes: how an eval runs a decoding mode (agentkit.config.MODES), each mapped to the engine mode it uses.
# The engine's "ar" runs twice: under the call's template ("ar-constrained") and as free text parsed after
# ("ar-unconstrained"); every other eval mode is constrained.
UNCONSTRAINED = "ar-unconstrained"
ENGINE_MODE: dict[str, str] = {UNCONSTRAINED: "ar", "ar-constrained": "ar", "diffusion-causal": "diffusion",
                               "diffusion": "diffusion", "verify": "verify", "verify-drafter": "verify"}
# the name result files written before the unconstrained mode had its own name give it, for their readers
RESULT_ALIASES: dict[str, str] = {"ar": UNCONSTRAINED}
DRAFTS: dict[str, str] = {"verify-drafter": "drafter"}  # eval modes whose verify drafts are not lookup's
ALL_EVAL_MODES: tuple[str, ...] = tuple(ENGINE_MODE)
EVAL_MODES: tuple[str, ...] = (UNCONSTRAINED, "ar-constrained", "diffusion", "verify")  # the default set


def eval_mode_name(mode: str) -> str:
    """The eval mode a result file's mode name stands for (``"ar"`` in older files: ``"ar-unconstrained"``)."""
    return RESULT_ALIASES.get(mode, mode)


@contextmanager
def adapter_off(engine):
    """Within the block, diffusion mode runs as a causal canvas on the base weights (the engine's adapter off)."""
    cfg = getattr(engine, "config", None)
    if cfg is None or not getattr(cfg, "adapter", False):
        yield
        return
    cfg.adapter = False
    try:
        yield
    finally:
        cfg.adapter = True


def diffusion_variant(engine) -> str:
    """What ``diffusion`` means on this engine: the adapter it uses, or the causal canvas."""
    path = getattr(engine, "adapter_path", None)
    return f"adapter {path}" if path else "causal canvas (no adapter)"


# -- suites -------------------------------------------------------------------------------------------------------


# an eval's token budgets: constrained modes stop at the template's end long before MAX_NEW_TOKENS; unconstrained
# AR gets enough for a call and a bounded amount of prose
MAX_NEW_TOKENS = 512
FREE_MAX_NEW_TOKENS = 128
_EVAL_SETTINGS = tuple(s.name for s in where("evals"))  # EvalContext's decoding settings (the table's "evals")


@dataclass
class EvalContext:
    """Per-run decoding settings a suite's ``run`` uses (``config(mode)``), and the canvas hook for one call. The
    decoding settings are the table's ``evals`` ones (``agentkit/settings.py``), with its defaults but the budget's
    and the seed's (evals are seeded)."""

    seed: int = 0
    max_new_tokens: int = MAX_NEW_TOKENS
    free_max_new_tokens: int = FREE_MAX_NEW_TOKENS
    canvas_length: int = BY_NAME["canvas_length"].default
    greedy: str = BY_NAME["greedy"].default  # DecodeConfig.greedy: "byte" or "token" (a plain argmax)
    copy_bias: float = BY_NAME["copy_bias"].default  # DecodeConfig.copy_bias (agentkit/engine/copy.py); 0: off
    copy_from: str = BY_NAME["copy_from"].default  # DecodeConfig.copy_from: "prompt" or "user"
    copy_numbers: bool = BY_NAME["copy_numbers"].default  # DecodeConfig.copy_numbers
    prompt: str = "default"  # bfcl: the system prompt, a name in agentkit.evals.bfcl.PROMPTS
    on_draft: Callable[[list[int], list[bool]], None] | None = None  # set by the runner for diffusion calls
    frames: list[tuple[list[int], list[bool]]] = field(default_factory=list)

    def config(self, mode: str):
        from ..config import DecodeConfig

        if mode not in ENGINE_MODE:
            raise ValueError(f"unknown mode {mode!r}; expected one of {ALL_EVAL_MODES}")
        given = {name: getattr(self, name) for name in _EVAL_SETTINGS}
        if mode == UNCONSTRAINED:
            given["max_new_tokens"] = self.free_max_new_tokens
        return DecodeConfig(mode=ENGINE_MODE[mode], draft=DRAFTS.get(mode, "lookup"), **given)

    @staticmethod
    def constrained(mode: str) -> bool:
        return mode != UNCONSTRAINED

    def generate(self, engine, prompt, mode: str, *, template=None, **kw):
        """``engine.generate`` in eval mode ``mode`` (the canvas hook attached for diffusion modes)."""
        cfg = _fit_context(engine, prompt, self.config(mode))
        on_draft = self.on_draft if cfg.mode == "diffusion" else None
        if mode == "diffusion-causal":
            with adapter_off(engine):
                return engine.generate(prompt, cfg, template=template, on_draft=on_draft, **kw)
        return engine.generate(prompt, cfg, template=template, on_draft=on_draft, **kw)


@dataclass
class Suite:
    """``load(data, limit) -> items``; ``prepare(engine, item) -> P`` once per item (its exception is passed on
    instead); ``run(engine, item, P | Exception, mode, ctx) -> row`` with at least ``success`` (bool), ``valid``
    (bool) and ``stats`` (a ``DecodeStats`` or its ``to_dict()``; for several generations per item, their sum).
    A row may carry ``_canvas`` (see :func:`canvas_record`) for the canvas-evolution plot."""

    name: str
    load: Callable[[Path, int | None], list]
    run: Callable[..., dict]
    prepare: Callable[[Any, Any], Any] | None = None
    modes: tuple[str, ...] = EVAL_MODES
    item_id: Callable[[Any], str] = field(default=lambda it: str(getattr(it, "id", it)))


_SUITES: dict[str, Suite | Callable[..., dict]] = {}


def register_suite(name: str, fn: Suite | Callable[..., dict]) -> None:
    """Register a suite: a :class:`Suite`, or a function ``fn(*, data, modes, limit, engine, seed, out) -> dict``
    (``engine`` may be None: build one when needed) that runs the whole suite and returns the results dict."""
    _SUITES[name] = fn


def get_suite(name: str) -> Suite | Callable[..., dict]:
    if name not in _SUITES:
        try:
            importlib.import_module(f"{__package__}.{name}")
        except ModuleNotFoundError as e:
            if e.name != f"{__package__}.{name}":
                raise
    if name not in _SUITES:
        known = sorted({*_SUITES, "bfcl", "coverage"})
        raise ValueError(f"unknown eval suite {name!r}; known: {', '.join(known)} "
                         f"(a suite registers itself with agentkit.evals.runner.register_suite)")
    return _SUITES[name]


def _coverage(*, data: Path, modes, limit, engine, seed, out) -> dict:
    from ..constrain.coverage import run_coverage

    return run_coverage(data, limit=limit, out=out)


register_suite("coverage", _coverage)


# -- canvas record ------------------------------------------------------------------------------------------------


def canvas_record(engine, result, template, frames: list[tuple[list[int], list[bool]]], canvas_length: int,
                  item_id: str = "", mode: str | None = None) -> dict:
    """What the canvas-evolution plot needs from one diffusion generation.

    ``frames`` are the ``on_draft`` calls (the canvas fed to each denoiser pass, and which positions were final
    before it); they are grouped into blocks with ``stats.steps_per_block``. ``pinned`` marks output positions the
    template placed (found by replaying the output through the template's constraint). Block ``b`` starts at output
    position ``lead + b * canvas_length``, ``lead`` being the pinned run that went straight into the prefill."""
    tok = engine.tokenizer
    ids = list(result.token_ids)
    pinned: list[bool] = []
    if template is not None:
        c = engine.constraint(template)
        state = c.start()
        for t in ids:
            if state is None:
                pinned.append(False)
                continue
            pinned.append(bool(c.forced(state)))
            state = c.advance(state, t)
    else:
        pinned = [False] * len(ids)
    lead = 0
    while lead < len(pinned) and pinned[lead]:
        lead += 1
    blocks, k = [], 0
    for b, n in enumerate(result.stats.steps_per_block):
        steps = [{"tokens": list(t), "frozen": list(f)} for t, f in frames[k:k + n]]
        k += n
        blocks.append({"offset": lead + b * canvas_length, "steps": steps})
    vocab = sorted({t for bl in blocks for s in bl["steps"] for t in s["tokens"]} | set(ids))
    return {
        "id": item_id, "mode": mode or result.stats.mode, "canvas_length": canvas_length, "lead_pinned": lead, "output": ids, "pinned": pinned, "blocks": blocks,
        "token_text": {str(t): _token_text(tok, t) for t in vocab},
        "text": result.text,
    }


def _token_text(tok, t: int) -> str:
    try:
        text = tok.decode([t], skip_special_tokens=False)
    except Exception:  # noqa: BLE001 -- an id the base tokenizer does not know (an adapter's mask token)
        text = ""
    return text if text else "[M]"


def _command(suite, data, modes, limit, model, out, plot, seed, adapter=None, dtype="auto", backend="auto",
             pass_width=None, prompt="default", lora=None) -> str:
    parts = ["agentkit", "eval", suite, "--data", str(data), "--modes", ",".join(modes)]
    if prompt != "default":
        parts += ["--prompt", prompt]
    for name, v in (("--dtype", dtype), ("--backend", backend)):
        if v != "auto":
            parts += [name, v]
    if pass_width:
        parts += ["--pass-width", str(pass_width)]
    if limit is not None:
        parts += ["--limit", str(limit)]
    if model:
        parts += ["--model", str(model)]
    if adapter:
        parts += ["--adapter", str(adapter)]
    if lora:
        parts += ["--lora", str(lora)]
    parts += ["--out", str(out)]
    if plot:
        parts += ["--plot", str(plot)]
    return " ".join(parts + ["--seed", str(seed)])


# -- the run ------------------------------------------------------------------------------------------------------


def _progress():
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    return Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                    TimeRemainingColumn(), TextColumn("{task.fields[status]}"),
                    console=Console(stderr=True), transient=False)


def _canvas_key(row: dict, index: int) -> tuple:
    s = row.get("stats") or {}
    return (bool(row.get("success")), s.get("decoder_forwards", 0), -index)


def build_engine(model: str | None = None, seed: int = 0, threads: int | None = None,
                 adapter: str | Path | None = None, dtype: str = "auto", backend: str = "auto",
                 pass_width: int | None = None, lora: str | Path | None = None):
    """The engine an eval run loads (once per process: the local run's, or each Ray worker's); ``dtype``,
    ``backend``, ``pass_width`` and ``lora`` as in :class:`~agentkit.config.EngineConfig`."""
    from ..config import EngineConfig
    from ..engine.engine import Engine

    return Engine(EngineConfig(model=model, seed=seed, threads=threads, dtype=dtype, backend=backend,
                               pass_width=pass_width, adapter_path=str(adapter) if adapter else None,
                               lora=str(lora) if lora else None))


@dataclass
class RunSettings:
    """The per-run decoding settings every worker uses (what :class:`EvalContext` is built from)."""

    seed: int = 0
    max_new_tokens: int = MAX_NEW_TOKENS
    free_max_new_tokens: int = FREE_MAX_NEW_TOKENS
    canvas_length: int = BY_NAME["canvas_length"].default
    prompt: str = "default"

    def context(self) -> EvalContext:
        return EvalContext(seed=self.seed, max_new_tokens=self.max_new_tokens,
                          free_max_new_tokens=self.free_max_new_tokens, canvas_length=self.canvas_length,
                          prompt=self.prompt)


@dataclass
class ItemResult:
    """Every mode of one item: its rows (in the order they ran) and its best canvas record, if any."""

    index: int
    rows: list[dict]
    canvas: tuple[tuple, dict] | None = None  # (ranking key, canvas record)


def run_item(impl: Suite, engine, item, index: int, modes: list[str], ctx: EvalContext,
             on_mode: Callable[[str, str], None] | None = None) -> ItemResult:
    """Run every mode of item ``index`` on ``engine``, one after another, each from an empty prefix cache; the mode
    order rotates by one per item."""
    iid = impl.item_id(item)
    try:
        prepared = impl.prepare(engine, item) if impl.prepare else None
    except Exception as e:  # noqa: BLE001 -- a schema the compiler refuses is a result, not a crash
        prepared = e
    order = modes[index % len(modes):] + modes[: index % len(modes)]
    out = ItemResult(index, [])
    for k, mode in enumerate(order):
        if on_mode is not None:
            on_mode(iid, mode)
        cold_prompts(engine)
        ctx.frames = []
        ctx.on_draft = lambda t, f: ctx.frames.append((list(t), list(f)))
        t0 = time.perf_counter()
        try:
            row = dict(impl.run(engine, item, prepared, mode, ctx))
        except Exception as e:  # noqa: BLE001 -- recorded, counted, the run goes on
            row = {"success": False, "valid": False, "error": f"{type(e).__name__}: {e}",
                   "error_type": "exception", "stats": None}
        canvas = row.pop("_canvas", None)
        row = {"id": iid, "mode": mode, "order": k, **row, "stats": stats_dict(row.get("stats")),
               "wall_ms": round(1000 * (time.perf_counter() - t0), 2)}
        out.rows.append(row)
        if canvas is not None and (mode == "diffusion" or "diffusion" not in modes):
            key = _canvas_key(row, index)
            if out.canvas is None or key > out.canvas[0]:
                out.canvas = (key, canvas)
    return out


class LocalExecutor:
    """Items one after another in this process, on one engine (the default executor).

    An executor runs ``(index, item)`` jobs with :func:`run_item` and yields :class:`ItemResult` as each finishes
    (any order); ``info`` names the model and the diffusion variant; ``command_args`` is appended to the run's
    command line. :class:`agentkit.evals.distributed.RayExecutor` is the other one."""

    command_args: tuple[str, ...] = ()

    def __init__(self, engine) -> None:
        self.engine = engine

    def info(self) -> dict[str, str]:
        return {"model": getattr(self.engine, "name", "?"), "diffusion": diffusion_variant(self.engine)}

    def run(self, suite: str, jobs: list[tuple[int, Any]], modes: list[str], settings: RunSettings,
            on_mode: Callable[[str, str], None] | None = None):
        impl, ctx = get_suite(suite), settings.context()
        for index, item in jobs:
            yield run_item(impl, self.engine, item, index, modes, ctx, on_mode)

    def close(self) -> None:
        pass


def _collect(executor, suite: str, items: list, modes: list[str], settings: RunSettings, result: dict,
             out: Path, progress: bool) -> None:
    """Run ``items`` through ``executor``; after every finished item, summarize and write ``result`` to ``out``
    (``partial``: true until the last one). The executor is closed however the run ends."""
    done: dict[int, list[dict]] = {}  # item index -> its rows; the JSON lists them in item order
    best_canvas: tuple | None = None
    t_run = time.perf_counter()

    def publish(partial: bool) -> None:
        result["items"] = rows = [r for i in sorted(done) for r in done[i]]
        by_mode = {m: summarize([r for r in rows if r["mode"] == m]) for m in modes}
        result["modes"] = {m: s for m, s in by_mode.items() if s["n"]}
        result["ratios_vs_ar_constrained"] = ratios(result["modes"])
        result["partial"] = partial
        result["items_done"] = len(done)
        result["wall_s"] = round(time.perf_counter() - t_run, 2)
        write_json_atomic(out, result)

    prog = _progress() if progress else None
    task = None
    if prog is not None:
        prog.start()
        task = prog.add_task(suite, total=len(items) * len(modes), status="")
    on_mode = (lambda iid, mode: prog.update(task, status=f"{iid} {mode}")) if prog is not None else None
    try:
        for res in executor.run(suite, list(enumerate(items)), modes, settings, on_mode):
            done[res.index] = res.rows
            if res.canvas is not None and (best_canvas is None or res.canvas[0] > best_canvas):
                best_canvas, result["canvas_example"] = res.canvas
            if prog is not None:
                prog.update(task, advance=len(res.rows), status=f"{res.rows[0]['id'] if res.rows else ''} done")
            publish(partial=True)
    finally:
        if prog is not None:
            prog.stop()
        executor.close()
    publish(partial=False)


def run_eval(suite: str, data: Path, modes: list[str], limit: int | None = None, model: str | None = None,
             out: Path = Path("eval.json"), plot: Path | None = None, seed: int = 0, engine=None, *,
             max_new_tokens: int = MAX_NEW_TOKENS, free_max_new_tokens: int = FREE_MAX_NEW_TOKENS,
             canvas_length: int = BY_NAME["canvas_length"].default,
             threads: int | None = None, progress: bool = True, quiet: bool = False,
             adapter: str | Path | None = None, executor=None, dtype: str = "auto", backend: str = "auto",
             pass_width: int | None = None, prompt: str = "default", lora: str | Path | None = None) -> dict:
    """Run ``suite`` over ``data`` in each of ``modes`` (item-major, one engine), write ``out`` (JSON, rewritten
    after every item), print a markdown table, and write plots when ``plot`` is given (``plot``, and siblings
    ``.tpf.png`` and ``.canvas.png``). ``limit``: at most this many items per data file. ``threads``: torch threads
    (None: torch's default; on a shared, loaded CPU 1 thread is several times faster than 2). ``adapter``: the
    block-diffusion adapter directory diffusion mode uses (None: the one shipped for the default model). ``dtype``,
    ``backend``, ``pass_width``, ``lora``: the engine's (:class:`~agentkit.config.EngineConfig`), when the run builds
    it (a suite that runs itself, ``agent``, gets that engine too).
    ``prompt``: bfcl's system prompt, a name in :data:`agentkit.evals.bfcl.PROMPTS`.
    ``executor``: where items run (default: a :class:`LocalExecutor` on ``engine``, or on one built from
    ``model``/``adapter``); rows come back per item and are summarized here, the same for every executor. Returns
    the results."""
    data, out = Path(data), Path(out)
    modes = list(modes)  # empty: the suite's own default set
    command = _command(suite, data, modes, limit, model, out, plot, seed, adapter, dtype, backend, pass_width, prompt,
                       lora)
    if prompt != "default":
        from .bfcl import PROMPTS

        if suite != "bfcl":
            raise UserError(f"--prompt chooses bfcl's system prompt; suite {suite!r} has none")
        if prompt not in PROMPTS:
            raise UserError(f"unknown bfcl prompt {prompt!r}; known: {', '.join(PROMPTS)}")
    impl = get_suite(suite)
    random.seed(seed)
    import torch

    torch.manual_seed(seed)

    if not isinstance(impl, Suite) and executor is not None:
        executor.close()
        raise UserError(f"suite {suite!r} runs itself in one process; --ray runs item-based suites only")
    if not isinstance(impl, Suite):
        if engine is None:  # the run's engine options hold here too (they were ignored: always the default engine)
            engine = build_engine(model, seed, threads, adapter, dtype, backend, pass_width, lora)
        res = impl(data=data, modes=modes, limit=limit, engine=engine, seed=seed, out=out)
        if isinstance(res, Suite):
            impl = res
        else:
            res = dict(res or {})
            res.setdefault("suite", suite)
            res.setdefault("env", environment(command))
            write_json_atomic(out, res)
            if not quiet:
                print(markdown_table(res) if "modes" in res else
                      json.dumps({k: v for k, v in res.items() if k not in ("failures", "items", "env")}, indent=2))
            return res

    modes = modes or [m for m in EVAL_MODES if m in impl.modes]
    bad = [m for m in modes if m not in impl.modes]
    if bad:
        hint = (f"; 'ar' names no {suite} mode: say ar-constrained (the engine's ar under the call's template) or "
                f"{UNCONSTRAINED} (free text, parsed after)" if "ar" in bad and UNCONSTRAINED in impl.modes else "")
        raise UserError(f"suite {suite!r} has no mode(s) {bad}; modes: {', '.join(impl.modes)}{hint}")
    items = impl.load(data, limit)
    if executor is None:
        if engine is None:
            engine = build_engine(model, seed, threads, adapter, dtype, backend, pass_width, lora)
        elif threads:
            torch.set_num_threads(threads)
        executor = LocalExecutor(engine)
    settings = RunSettings(seed=seed, max_new_tokens=max_new_tokens, free_max_new_tokens=free_max_new_tokens,
                           canvas_length=canvas_length, prompt=prompt)
    command = " ".join([command, *executor.command_args])
    info = executor.info()
    result: dict[str, Any] = {
        "suite": suite, "model": info.get("model", str(model)), "data": str(data), "limit": limit,
        "seed": seed, "diffusion": info.get("diffusion"), "modes": {}, "ratios_vs_ar_constrained": {},
        "env": environment(command),
        "partial": True, "items_done": 0, "items_total": len(items), "items": [], "canvas_example": None,
    }
    _collect(executor, suite, items, modes, settings, result, out, progress)
    if not quiet:
        print(f"\n{suite} · {result['model']} · {len(items)} items · {result['wall_s']:.0f} s\n")
        print(markdown_table(result))
    if plot is not None:
        from .plots import plot_all

        result["plots"] = [str(p) for p in plot_all(result, Path(plot))]
        write_json_atomic(out, result)
    return result


# -- built-in suite: bfcl -----------------------------------------------------------------------------------------


def _bfcl_suite() -> Suite:
    from . import bfcl

    def prepare(engine, item):
        return bfcl.compile_call(item)

    def run(engine, item, prepared, mode, ctx: EvalContext) -> dict:
        template = None
        if ctx.constrained(mode):
            if isinstance(prepared, Exception):
                return {"success": False, "valid": False, "error": f"compile: {type(prepared).__name__}: {prepared}",
                        "error_type": "compile", "stats": None}
            template = prepared.template()
        res = ctx.generate(engine, bfcl.build_prompt(item, ctx.prompt), mode, template=template)
        row = {"category": item.category, **bfcl.evaluate(item, res.text, res.value), "text": res.text[:2000],
               "finish_reason": res.stats.finish_reason, "stats": res.stats}
        if mode.startswith("diffusion") and ctx.frames:
            row["_canvas"] = canvas_record(engine, res, template, ctx.frames, ctx.canvas_length, item.id, mode)
        if template is not None:  # the engine memoises a constraint per template object: drop this one
            getattr(engine, "_constraints", {}).pop(id(template), None)
        return row

    return Suite(name="bfcl", load=bfcl.load_bfcl, run=run, prepare=prepare, modes=ALL_EVAL_MODES,
                 item_id=lambda it: it.id)


_SUITES["bfcl"] = _bfcl_suite()


def _fit_context(engine: Any, prompt: Any, cfg: Any) -> Any:
    """``cfg`` with its token budget cut to what the model's context leaves after ``prompt`` (as the server fits a
    default ``max_tokens``): an eval's budget is a ceiling, not a request the engine should refuse."""
    context = getattr(engine, "context_length", None)
    encode = getattr(engine, "encode_prompt", None)
    if not isinstance(context, int) or encode is None:
        return cfg
    room = context - len(encode(prompt))
    return replace(cfg, max_new_tokens=max(1, min(cfg.max_new_tokens, room)))
