"""The ``agentkit`` command line."""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path
from typing import Any, NoReturn

import typer
from rich.console import Console
from rich.table import Table

from .errors import AgentkitError, UserError
from .settings import where

app = typer.Typer(add_completion=False, no_args_is_help=True, help="agentkit: structured block-diffusion decoding")
console = Console(stderr=True)
_DEBUG = False  # --debug: a traceback with every error


@app.callback()
def _options(debug: bool = typer.Option(False, "--debug", help="print the full traceback with an error")) -> None:
    global _DEBUG
    _DEBUG = debug


BACKEND_HELP = "engine backend: auto (torch) | torch | llama.cpp (the [llama] extra; its text differs from torch's)"

# the engine's options: EngineConfig's fields (their types and defaults) with the CLI's help; serve offers them all.
# prefix_cache_mb is the CLI's unit for EngineConfig.prefix_cache_bytes
ENGINE_HELP: dict[str, str] = {
    "model": "local model directory (default: embedded SmolLM2)",
    "threads": "torch threads (default: 1 on up to 4 cores; see docs/threads.md)",
    "dtype": "engine dtype: auto | float32 | bfloat16",
    "backend": BACKEND_HELP,
    "pass_width": ("fixed-shape passes of N positions: verify equals AR bit for bit in bf16, but requests' forwards "
                   "are not batched together"),
    "attention": "auto (one-token decode steps on CPU as float32 matmuls) | sdpa",
    "q4_steps": ("auto (passes of up to 8 positions on the GGUF's 4-bit weights in a bf16 CPU engine, or a float32 "
                 "one where dtype auto chose float32) | on (any CPU dtype) | int8 (as auto, but a merged LoRA's passes on an "
                 "8-bit copy of its weights) | off"),
    "prepack": "auto (a bf16 CPU engine's weights prepacked once for oneDNN) | off",
    "row_exact": ("auto (on the 4-bit CPU engine, passes after the prompt in pieces of 8 positions on per-row "
                  "kernels: verify equals AR bit for bit) | off"),
    "prefix_cache": "exact prompt-prefix reuse across requests (docs/prefix_cache.md)",
    "prefix_cache_mb": "bound on the prefix cache in MiB (default: 1/16 of RAM, at most 512)",
    "prompt_chunk": ("the prompt pass's longest piece, in tokens (it is also cut at each chat message); 0: one pass, "
                     "no prefix cache"),
    "lora": ("a LoRA merged into the weights (EngineConfig.lora); 'none': the weights as loaded; default: the "
             "model's own (the default model's: its loop adapter, adapters/smollm2-135m-loop)"),
}
MB_OPTION = ("prefix_cache_mb", "prefix_cache_bytes")  # option -> the EngineConfig field it sets, in bytes


def engine_option_specs() -> dict[str, tuple[type, Any, str]]:
    """option -> (type, default, help) of the engine's options: the type and default are EngineConfig's field's
    (prefix_cache_mb: prefix_cache_bytes' in MiB)."""
    import typing

    from .config import EngineConfig

    hints = typing.get_type_hints(EngineConfig)
    defaults = {f.name: f.default for f in dataclasses.fields(EngineConfig)}
    out: dict[str, tuple[type, Any, str]] = {}
    for name, help_ in ENGINE_HELP.items():
        field_ = MB_OPTION[1] if name == MB_OPTION[0] else name
        kind = next(a for a in typing.get_args(hints[field_]) or (hints[field_],) if a is not type(None))
        out[name] = (kind, defaults[field_], help_)
    return out


ENGINE_OPTIONS = engine_option_specs()
# serve's options for CompileLimits: option -> (CompileLimits field, help)
COMPILE_OPTIONS: dict[str, tuple[str, str]] = {
    "compile_timeout_s": ("max_seconds", ("time limit of one schema build (then HTTP 400 naming the limit); also cut "
                                         "to the request's time left")),
    "compile_max_states": ("max_states", "states of any automaton a schema build makes"),
    "compile_max_slot_states": ("max_slot_states", "states of one slot's automaton before its token index is built"),
    "compile_max_branch_names": ("max_branch_names", ("branches x property names of one anyOf/oneOf of objects, "
                                                     "refused before compiling")),
}
# agentkit generate's decoding options (the table's "cli" settings), and its defaults apart from the table's
GENERATE_SETTINGS = tuple(s.name for s in where("cli"))
GENERATE_DEFAULTS: dict[str, Any] = {"max_new_tokens": 128}  # a short reply on the command line
_EVAL_ENGINE = ("model", "threads", "dtype", "backend", "pass_width", "lora")
SERVE_OWN = ("served_model_names", "compile_limits")  # serve's own options (--served-model-name, COMPILE_OPTIONS)


def _option(name: str, kind: type, default: Any, help: str) -> Any:
    import inspect

    annotation = kind if default is not None else (kind | None)
    return inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, annotation=annotation,
                             default=typer.Option(default, help=help))


def _engine_options(*names: str) -> list[Any]:
    """The options of these ENGINE_OPTIONS (all: ``agentkit serve``'s)."""
    return [_option(name, *ENGINE_OPTIONS[name]) for name in (names or ENGINE_OPTIONS)]


def _decode_options(*names: str) -> list[Any]:
    """The options of these decoding settings: name, type, default and help from the table (agentkit.settings),
    a default of the CLI's own from GENERATE_DEFAULTS."""
    from .settings import BY_NAME

    kinds = {"int": int, "float": float, "bool": bool, "str": str, "text": str}
    out = []
    for name in names:
        s = BY_NAME[name]
        help_ = f"{s.doc} ({' | '.join(s.choices)})" if s.choices else s.doc
        out.append(_option(name, kinds[s.kind], GENERATE_DEFAULTS.get(name, s.default), help_))
    return out


def _server_options() -> list[Any]:
    """serve's options for ServerConfig's fields (their help is the field's), then CompileLimits'. Each defaults
    to None: the config's own default, which the help names. Without the ``server`` extra (the core install) there
    are none: ``agentkit.serving`` cannot be imported, and ``agentkit serve`` fails naming the extra."""
    from agentkit._extras import missing
    from agentkit.constrain.limits import CompileLimits

    if missing("server"):
        return []
    from agentkit.serving.config import ServerConfig

    out = []
    for f in dataclasses.fields(ServerConfig):
        if f.name not in SERVE_OWN:
            kind = float if "float" in str(f.type) else int if "int" in str(f.type) else str
            default = "" if f.default is None else f" (default {f.default})"
            out.append(_option(f.name, kind, None, f.metadata["help"] + default))
    defaults = CompileLimits()
    for name, (field_, help_) in COMPILE_OPTIONS.items():
        kind = float if name.endswith("_s") else int
        out.append(_option(name, kind, None, f"{help_} (default {getattr(defaults, field_)})"))
    return out


def _with_options(params: list[Any]) -> Any:
    """Adds ``params`` (inspect.Parameter) to a command's signature, which typer reads; the command takes them
    as ``**options``."""
    import inspect

    def add(fn: Any) -> Any:
        sig = inspect.signature(fn)
        own = [p for p in sig.parameters.values() if p.kind is not p.VAR_KEYWORD]
        fn.__signature__ = sig.replace(parameters=own + params)
        return fn
    return add



def _engine(model: str | None, adapter: bool = True, backend: str = "auto", threads: int | None = None):
    from .config import EngineConfig
    from .engine.engine import Engine

    return Engine(EngineConfig(model=model, adapter=adapter, backend=backend, threads=threads))


def _stats_table(title: str, stats) -> Table:
    t = Table(title=title)
    t.add_column("figure")
    t.add_column("value", justify="right")
    d = stats.to_dict()
    for k in ("mode", "prompt_tokens", "output_tokens", "pinned_tokens", "slot_tokens", "encoder_forwards",
              "decoder_forwards", "forwards", "cached_prompt_tokens", "tokens_per_forward", "tokens_per_forward_excl_pinned", "prefill_ms",
              "denoise_ms", "commit_ms", "constraint_ms", "compile_ms", "latency_ms", "output_tokens_per_s",
              "finish_reason"):
        v = d[k]
        t.add_row(k, f"{v:.1f}" if isinstance(v, float) else str(v))
    return t


def _fail(e: BaseException) -> NoReturn:
    """One ``error:`` line (a multi-line message joined with "; "), the traceback too with ``--debug``; exit 2
    for agentkit's own errors (bad input), 1 for anything else."""
    from rich.markup import escape

    if _DEBUG:
        console.print_exception()
    message = "; ".join(line.strip() for line in str(e).splitlines() if line.strip())
    hint = "" if _DEBUG or isinstance(e, AgentkitError) else " (agentkit --debug ... for the traceback)"
    console.print(f"[red]error:[/red] {type(e).__name__}: {escape(message)}{hint}", soft_wrap=True)
    raise typer.Exit(2 if isinstance(e, AgentkitError) else 1)


@app.command()
@_with_options(_engine_options("model", "backend", "threads") + _decode_options(*GENERATE_SETTINGS))
def generate(
    prompt: str = typer.Argument(..., help="the user message"),
    schema: Path | None = typer.Option(None, help="JSON Schema file: constrain the output to it"),
    no_adapter: bool = typer.Option(False, "--no-adapter", help="plain causal canvas even if an adapter exists"),
    as_json: bool = typer.Option(False, "--json", help="print one JSON object: text, mode, value, stats"),
    **options: Any,
) -> None:
    """Generate a reply (optionally under a JSON Schema) and print what it cost."""
    model, backend, threads = options["model"], options["backend"], options["threads"]
    from .config import DecodeConfig

    try:
        cfg = DecodeConfig(**{name: options[name] for name in GENERATE_SETTINGS})
        template = None
        if schema is not None:
            from .constrain.compiler import compile_schema

            if not schema.is_file():
                raise FileNotFoundError(f"schema file {str(schema)!r} not found")
            template = compile_schema(json.loads(schema.read_text()))
        res = _engine(model, adapter=not no_adapter, backend=backend, threads=threads).generate(prompt, cfg,
                                                                                              template=template)
    except (AgentkitError, FileNotFoundError, json.JSONDecodeError) as e:
        _fail(e)
    if as_json:
        print(json.dumps(res.to_dict(), ensure_ascii=False))
    else:
        print(res.text)
        console.print(_stats_table("decoding", res.stats))


@app.command()
def demo(
    model: str | None = typer.Option(None, help="local model directory (default: embedded SmolLM2)"),
    mode: str | None = typer.Option(None, help="mode for the structured step (default: the calibrated one, as "
                                    "extract's; diffusion, verify or ar)"),
    backend: str = typer.Option("auto", help=BACKEND_HELP),
) -> None:
    """One structured extraction (``extract``'s prompt, grounded template and copy prior) and one free-form reply
    on the default model, with decoding statistics."""
    from pydantic import BaseModel

    from .calibration import step_mode, why
    from .config import DecodeConfig
    from .sdk._extract import extract_messages
    from .steps.grounded import GroundedOutput

    class Meeting(BaseModel):
        person: str
        city: str
        day: str
        attendees: int

    text = "Lunch with Maria Lopez in Lisbon on Friday, the four of us."
    try:
        engine = _engine(model, backend=backend)
        calibrated = mode is None
        mode = mode or step_mode("extract", model)
        template = GroundedOutput(Meeting, text).template(None, True)  # extract's: each value a span of the text
        config = DecodeConfig(mode=mode, max_new_tokens=96, copy_source=text, copy_first_digit=True)  # extract's
        res = engine.generate(extract_messages(Meeting, text), config, template=template)
        console.print(f"[bold]extraction[/bold] ({mode}): {text!r}")
        if calibrated:  # say why
            console.print(f"  the extract step's mode: {why('extract', model)}", highlight=False)
        print(json.dumps(Meeting.model_validate(res.value).model_dump(), ensure_ascii=False))
        console.print(_stats_table(f"extraction, {mode} mode", res.stats))
        reply_mode = step_mode("reply", model)  # verify (AR's text, checked drafts) as calibrated, or ar
        reply = engine.generate("Give one tip for writing clear emails.", DecodeConfig(mode=reply_mode, max_new_tokens=60))
        console.print(f"[bold]free-form reply[/bold] ({reply_mode}):")
        console.print(f"  the reply step's mode: {why('reply', model)}", highlight=False)
        print(reply.text)
        console.print(_stats_table(f"reply, {reply_mode} mode", reply.stats))
    except AgentkitError as e:
        _fail(e)


@app.command("eval")
@_with_options(_engine_options(*_EVAL_ENGINE))
def eval_(
    suite: str = typer.Argument(..., help="bfcl | coverage | validity | agent | agent-loop | extract | repair"),
    data: Path | None = typer.Option(None, help="data folder (agent: default evals/coding_tasks; agent-loop: "
                                     "default evals/agent_loop, or a BFCL-format folder to generate tasks from)"),
    modes: str = typer.Option("", "--modes", "--mode", help="comma-separated modes (default: the suite's own set; "
                              "bfcl: ar-unconstrained | ar-constrained | diffusion | verify | ...; "
                              "agent-loop: default | ar | ar-constrained | verify | diffusion, or none "
                              "for the peers only)"),
    limit: int | None = typer.Option(None, help="at most N items per file"),
    out: Path = typer.Option(Path("eval.json"), help="results JSON"),
    plot: Path | None = typer.Option(None, help="PNG plot path"),
    seed: int = typer.Option(0, help="seed"),
    adapter: Path | None = typer.Option(None, help="block-diffusion adapter dir for diffusion mode (default: "
                                           "the one shipped for the default model)"),
    ray: str | None = typer.Option(None, "--ray", help="run items on Ray actors: 'local' (a Ray instance on this "
                                      "machine) or a cluster address (auto, HOST:6379, ray://HOST:10001)"),
    workers: int = typer.Option(2, help="with --ray: actors, each loading the model once"),
    prompt: str = typer.Option("default", help="bfcl: the system prompt (default | plain | expert | example | "
                               "rules, see agentkit.evals.bfcl.PROMPTS)"),
    kinds: str = typer.Option("", help="agent-loop: comma-separated task kinds (one_tool, no_tool, two_tool, "
                              "fail_once; default all)"),
    peers: str = typer.Option("", help="agent-loop: comma-separated peer loops through agentkit serve "
                              "(pydantic-ai, openai)"),
    base_url: str | None = typer.Option(None, help="agent-loop peers: a running server's /v1 URL (default: start "
                                        "agentkit serve on the default model)"),
    max_iterations: int = typer.Option(6, help="agent-loop: iteration limit of every run"),
    bfcl_single: bool = typer.Option(True, "--bfcl-single/--no-bfcl-single", help="agent-loop: also the single "
                                     "BFCL call on the same items, per mode"),
    resume: Path | None = typer.Option(None, help="agent-loop: keep the rows of this earlier result JSON (same "
                                       "task, framework and mode) instead of rerunning them"),
    after_result: str | None = typer.Option(None, help="agent-loop: the Agent's decision rule after a tool result "
                                            "(exclude_last, exclude_done, exclude_moved, moved, null; default: the "
                                            "Agent's)"),
    **engine: Any,
) -> None:
    """Run an evaluation suite; prints a markdown table and writes JSON (and plots)."""
    model, threads, dtype, backend, pass_width, lora = (engine[k] for k in _EVAL_ENGINE)
    try:
        data = _check_eval(suite, data, after_result, model=model, adapter=adapter, lora=lora, dtype=dtype,
                           backend=backend, pass_width=pass_width, modes=modes, plot=plot, ray=ray)
        if suite == "extract":
            _eval_extract(data, modes, limit, model, out, plot, threads, dtype, backend, lora)
        elif suite == "agent-loop":
            _agent_loop(data, modes, kinds, peers, base_url, limit, out, plot, threads, max_iterations, bfcl_single,
                        resume, seed, model, lora, after_result)
        elif suite == "coverage":
            _eval_coverage(data, limit, out)
        else:
            _eval_suite(suite, data, modes, limit, model, out, plot, seed, threads, adapter, ray, workers, dtype,
                        backend, pass_width, prompt, lora)
    except Exception as e:  # noqa: BLE001 (one error line; --debug for the traceback)
        _fail(e)


def _check_eval(suite: str, data: Path | None, after_result: str | None, **options: Any) -> Path:
    """The suite's data folder, after the engine options (a bad value is one error line now, not in a worker
    later) and the options the suite would not use (``options``: the command's, by name) are checked."""
    from .config import EngineConfig

    lora = options["lora"]
    EngineConfig(dtype=options["dtype"], backend=options["backend"], pass_width=options["pass_width"],
                 lora=str(lora) if lora else None)
    data = _check_suite(suite, data)
    _check_unused_options(suite, after_result, {"--" + k.replace("_", "-"): v for k, v in options.items()})
    return data


def _eval_coverage(data: Path, limit: int | None, out: Path) -> None:
    from .constrain.coverage import run_coverage

    res = run_coverage(data, limit=limit, out=out)
    print(json.dumps({k: v for k, v in res.items() if k != "failures"}, indent=2))


def _eval_suite(suite: str, data: Path, modes: str, limit: int | None, model: str | None, out: Path,
                plot: Path | None, seed: int, threads: int | None, adapter: Path | None, ray: str | None,
                workers: int, dtype: str, backend: str, pass_width: int | None, prompt: str,
                lora: Path | None) -> None:
    """A suite of ``agentkit.evals.runner`` (bfcl, validity, agent), in this process or on Ray actors."""
    from .evals.runner import run_eval

    executor = None
    if ray is not None:
        from ._ray import require_ray

        require_ray()
        from .evals.distributed import RayEvalConfig, RayExecutor

        executor = RayExecutor(RayEvalConfig(address=ray, workers=workers, model=model, seed=seed,
                                             threads=threads or 1, adapter=str(adapter) if adapter else None,
                                             dtype=dtype, backend=backend, pass_width=pass_width,
                                             lora=str(lora) if lora else None))
    run_eval(suite, data, [m.strip() for m in modes.split(",") if m.strip()], limit, model, out, plot, seed,
             threads=threads, adapter=adapter, executor=executor, dtype=dtype, backend=backend,
             pass_width=pass_width, prompt=prompt, lora=lora)


SUITES = {"bfcl": "runner", "coverage": "runner", "validity": "validity", "agent": "coding",
          "extract": "extract_run", "agent-loop": "agent_loop", "repair": "repair"}  # suite -> module


def _eval_extract(data: Path, modes: str, limit: int | None, model: str | None, out: Path, plot: Path | None,
                  threads: int | None, dtype: str, backend: str, lora: Path | None = None) -> None:
    """``agentkit eval extract``: rows are modes (``ar``, ``ar+compact``, ...) and peers (``outlines-xgrammar``)."""
    from .config import EngineConfig
    from .engine.engine import Engine
    from .evals.extract_run import parse_row, run_extract_eval, table
    from .evals.peers import PEERS, load_peers

    rows = [m.strip() for m in modes.split(",") if m.strip()] or ["ar", "diffusion", "verify"]
    for r in rows:
        if r not in PEERS:
            parse_row(r)  # a bad setting is one error line now, before the model loads
    peers = load_peers([r for r in rows if r in PEERS], model_dir=model, threads=threads)
    rows = [r for r in rows if r not in PEERS or r in peers]
    engine = Engine(EngineConfig(model=model, threads=threads, dtype=dtype, backend=backend,
                                 lora=str(lora) if lora else None))
    report = run_extract_eval(data, rows, limit=limit, out=out, plot=plot, engine=engine, peers=peers,
                              command="agentkit " + " ".join(sys.argv[1:]))
    print(table(report["summary"]))


def _check_unused_options(suite: str, after_result: str | None, engine_options: dict[str, Any] | None = None) -> None:
    """Options the suite would not use are an error, not ignored: ``--after-result`` outside agent-loop, and any
    engine option (``engine_options``: flag -> value, None or the default when not given) on ``coverage``."""
    from .errors import UserError

    if after_result is not None and suite != "agent-loop":
        raise UserError("--after-result is an agent-loop option")
    given = [flag for flag, value in (engine_options or {}).items() if value not in (None, "", "auto")]
    if given and suite == "coverage":
        raise UserError(f"the coverage suite loads no model and runs no modes (it measures the constraint compiler); "
                        f"not used: {', '.join(given)}")


def _split(text: str) -> list[str]:
    return [x.strip() for x in text.split(",") if x.strip()]


def _agent_loop(data, modes, kinds, peers, base_url, limit, out, plot, threads, max_iterations, bfcl,
                resume, seed, model, lora=None, after_result=None) -> None:
    """``agentkit eval agent-loop`` (``agentkit.evals.agent_loop``): the run, then its markdown table."""
    from .evals.agent_loop import run_agent_loop, table

    if threads:
        import torch

        torch.set_num_threads(threads)
    res = run_agent_loop(data, _split(modes) or ["default"], kinds=_split(kinds) or None, limit=limit, out=out,
                         plot=plot, peers=_split(peers), base_url=base_url, bfcl=bfcl, max_iterations=max_iterations,
                         resume=resume, seed=seed, model=model, lora=str(lora) if lora else None,
                         agent_options={"after_result": after_result} if after_result else None)
    print(f"\nagent-loop · {res['model']} · {res['tasks']} tasks · {res['wall_s']:.0f} s\n")
    print(table(res))


def _check_suite(suite: str, data: Path | None) -> Path:
    """A listed suite (its module imported, so it is registered) and an existing ``--data`` path (the agent
    suite's tasks by default)."""
    import importlib

    from .errors import UserError

    if suite not in SUITES:
        raise UserError(f"unknown eval suite {suite!r}; the suites are {', '.join(SUITES)}")
    module = importlib.import_module(f"agentkit.evals.{SUITES[suite]}")
    if data is None:
        if suite not in ("agent", "agent-loop", "repair"):
            raise UserError(f"--data is required for the {suite} suite: the folder with its data")
        data = module.TASKS_DIR
    if not data.exists():
        raise UserError(f"--data {str(data)!r}: no such file or folder{DATA_HINTS.get(suite, '')}")
    return data


# where each suite's data is, for the error when --data is not there (paths from a clone of the repository)
DATA_HINTS = {
    "bfcl": "; the BFCL questions ship in evals/data/bfcl (simple, multiple) and evals/data/bfcl_parallel",
    "agent-loop": "; the BFCL questions ship in evals/data/bfcl (or leave --data out: evals/agent_loop's tasks)",
    "coverage": "; MaskBench: git clone --depth 1 https://github.com/guidance-ai/jsonschemabench, then --data "
                "jsonschemabench/maskbench/data",
    "validity": "; MaskBench: git clone --depth 1 https://github.com/guidance-ai/jsonschemabench, then --data "
                "jsonschemabench/maskbench/data",
    "extract": "; the extraction items ship in evals/extract",
}


def _load_target(target: str):
    """``path/to/file.py:NAME`` or ``package.module:NAME``; a callable that is not an Agent is called to build one."""
    import importlib
    import importlib.util

    from .errors import UserError

    if ":" not in target:
        raise UserError(f"expected SCRIPT_OR_MODULE:AGENT, got {target!r}")
    where, name = target.rsplit(":", 1)
    if where.endswith(".py") or Path(where).is_file():
        path = Path(where)
        if not path.is_file():
            raise UserError(f"script {where!r} not found")
        folder = str(path.resolve().parent)
        if folder not in sys.path:  # as `python script.py` does: the script's sibling modules import
            sys.path.insert(0, folder)
        spec = importlib.util.spec_from_file_location(path.stem, path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    else:
        try:
            module = importlib.import_module(where)
        except ImportError as e:
            raise UserError(f"cannot import module {where!r}: {e}") from None
    if not hasattr(module, name):
        raise UserError(f"{where!r} has no attribute {name!r}")
    obj = getattr(module, name)
    from .sdk import Agent

    return obj if isinstance(obj, Agent) else obj()


@app.command()
def calibrate(
    data: Path | None = typer.Option(None, help="BFCL data folder (e.g. evals/data/bfcl)"),
    limit: int = typer.Option(10, help="questions per BFCL file"),
    modes: str = typer.Option("ar,diffusion,verify", help="comma-separated modes to measure"),
    tolerance: float = typer.Option(0.0, help="success within this of the best counts as equal"),
    model: str | None = typer.Option(None, help="local model directory (default: embedded SmolLM2)"),
    device: str = typer.Option("cpu", help="device the engine runs on (the calibration's key; cpu: this CPU's "
                               "kind, cpu-avx2 or cpu-avx512_bf16)"),
    threads: int | None = typer.Option(None, help="torch threads"),
    step: str | None = typer.Option(None, help="with --results: the step kind (extract, tool_input, ...) it measures"),
    results: list[Path] = typer.Option([], help="finished runs (`agentkit eval extract`, evals/drafter_verify.py "
                                         "--lookup, for reply `agentkit eval agent-loop`; repeat it for one run per "
                                         "mode): written as --step's own measurement"),
    out: Path | None = typer.Option(None, help="calibration JSON (default: agentkit/calibrations/<model>.<device>.json)"),
) -> None:
    """Measure every mode on the same BFCL questions and write the calibration RoutingPolicy reads: structured
    steps use the fastest mode (p50) whose success is within --tolerance of the best. With --step and --results, a
    step kind takes its own measurement instead (its own requests, the same rule) and the rest is kept."""
    try:
        from .calibration import Calibration, path_for

        if (step is None) != (not results):
            raise UserError("--step and --results go together (a step kind and the run that measured it)")
        if step is not None:
            from .evals.calibrate import with_step
            from .evals.report import read_json

            dest = out or path_for(model, device)
            if not dest.is_file():
                raise UserError(f"no calibration at {dest} to add a step to: run `agentkit calibrate --data ...` first")
            runs = [read_json(p) for p in results]
            cal = with_step(Calibration.from_json(dest.read_text()), step, runs, ", ".join(map(str, results)))
        else:
            cal = _calibrate_bfcl(data, limit, modes, tolerance, model, device, threads)
            dest = out or path_for(cal.model, device)
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_text(cal.to_json())
        for r in cal.steps[step] if step else cal.results:
            fw = f"{r.forwards:.2f}" if r.forwards is not None else "-"
            console.print(f"{r.mode:<10} success {r.success:.3f}  forwards {fw}  p50 {r.p50_ms:.0f} ms")
        chosen = cal.mode_for(step) if step else cal.structured
        console.print(f"{step or 'structured'} steps: {chosen!r} -> {dest}")
    except Exception as e:  # noqa: BLE001
        _fail(e)


def _calibrate_bfcl(data, limit, modes, tolerance, model, device, threads):
    from .config import EngineConfig
    from .engine.engine import Engine
    from .evals.calibrate import calibrate as run_calibration

    if data is None:
        raise UserError("agentkit calibrate needs --data (a BFCL folder), or --step with --results")
    engine = Engine(EngineConfig(model=model, device=device, threads=threads))
    return run_calibration(engine, data, limit=limit, modes=tuple(m for m in modes.split(",") if m),
                           tolerance=tolerance, device=device, command="agentkit " + " ".join(sys.argv[1:]))


@app.command()
def run(
    target: str = typer.Argument(..., help="SCRIPT_OR_MODULE:AGENT (an Agent, or a callable returning one)"),
    task: str = typer.Argument(..., help="the task for the agent"),
    trace: Path | None = typer.Option(None, help="append one JSON line per iteration to this file"),
    mode: str | None = typer.Option(None, help="force every step into ar | diffusion | verify"),
) -> None:
    """Run an agent on a task; prints its output and the per-iteration trace table."""
    try:
        agent = _load_target(target)
        result = agent.run_sync(task, mode=mode, trace_path=str(trace) if trace else None)
    except Exception as e:  # noqa: BLE001 (one error line; --debug for the traceback)
        if getattr(e, "trace", None) is not None:
            console.print(e.trace.to_table(width=console.width))
        _fail(e)
    print(result.output if isinstance(result.output, str) else json.dumps(result.output, default=str))
    console.print(result.trace.to_table(width=console.width))


def _engine_config(options: dict[str, Any]) -> Any:
    """The EngineConfig of the ENGINE_OPTIONS among ``options`` (popped from it)."""
    from .config import EngineConfig

    given = {name: options.pop(name) for name in ENGINE_OPTIONS if name in options}
    mb = given.pop(MB_OPTION[0], None)
    return EngineConfig(**given, **{MB_OPTION[1]: None if mb is None else mb * 2 ** 20})


def _server_config(options: dict[str, Any], *, host: str, api_key: str | None, api_key_file: Path | None,
                   allowed_hosts: str | None, served_model_name: list[str]) -> Any:
    """The ServerConfig of serve's options (the remaining ``options``: ServerConfig's and CompileLimits')."""
    from agentkit.serving.cli import read_api_key, with_host_default
    from agentkit.serving.config import ServerConfig

    from .constrain.limits import CompileLimits

    limits = {COMPILE_OPTIONS[k][0]: options.pop(k) for k in list(options) if k in COMPILE_OPTIONS}
    hosts = None if allowed_hosts is None else tuple(h for h in allowed_hosts.split(",") if h.strip())
    server = ServerConfig(api_key=read_api_key(api_key, api_key_file), allowed_hosts=hosts,
                          served_model_names=tuple(served_model_name),
                          compile_limits=CompileLimits(**{k: v for k, v in limits.items() if v is not None}),
                          **{k: v for k, v in options.items() if v is not None})
    return with_host_default(server, host)


@app.command()
@_with_options(_engine_options() + _server_options())
def serve(
    host: str = typer.Option("127.0.0.1", help="bind address (loopback by default)"),
    port: int = typer.Option(8000, help="port"),
    api_key_file: Path | None = typer.Option(None, help="read the bearer token from this file's one line"),
    served_model_name: list[str] = typer.Option([], "--served-model-name", help="a name requests' model may carry "
                                                "(repeat for several; default: the model's own name and "
                                                "'agentkit'); another name is HTTP 404"),
    log_level: str = typer.Option("info", help="uvicorn log level"),
    ray: bool = typer.Option(False, "--ray", help="serve as Ray Serve replicas (each one engine)"),
    ray_address: str = typer.Option("local", help="with --ray: 'local' (start Ray here) or a cluster address"),
    replicas: int = typer.Option(1, help="with --ray: fixed number of replicas"),
    autoscale: str | None = typer.Option(None, help="with --ray: MIN,MAX replicas, scaled on ongoing requests"),
    **options: Any,
) -> None:
    """Serve an OpenAI-compatible chat-completions endpoint with structured (constrained) decoding. Every
    ServerConfig field is an option of its name (serving/config.py), every engine setting one of ENGINE_OPTIONS."""
    try:
        from agentkit.serving.cli import check_address
        from agentkit.serving.cli import run as _run  # the [server] extra: a MissingExtraError naming it

        check_address(host, port)  # before the model loads (tens of seconds)
        engine = _engine_config(options)
        server = _server_config(options, host=host, api_key=options.pop("api_key", None), api_key_file=api_key_file,
                                allowed_hosts=options.pop("allowed_hosts", None),
                                served_model_name=served_model_name)
    except (AgentkitError, ValueError) as e:
        _fail(e)
    if ray:
        _serve_ray(server, engine, host=host, port=port, address=ray_address, replicas=replicas, autoscale=autoscale)
        return
    _run(engine, server, host=host, port=port, log_level=log_level)


def _serve_ray(server, engine, *, host, port, address, replicas, autoscale) -> None:
    """``agentkit serve --ray`` (see ``serving/ray_serve.py``)."""
    from ._ray import require_ray

    try:
        require_ray()
        from agentkit.serving.ray_serve import RayServeConfig, engine_fields, parse_autoscale, run

        cfg = RayServeConfig(replicas=replicas, autoscale=parse_autoscale(autoscale) if autoscale else None,
                             address=address, host=host, port=port)
        cfg = dataclasses.replace(cfg, **{k: getattr(engine, k) for k in engine_fields(cfg)})
    except AgentkitError as e:
        _fail(e)
    run(server, cfg)


def main() -> None:  # pragma: no cover
    app()


if __name__ == "__main__":  # python -m agentkit.cli serve ... (evals/load_server.py --spawn)
    main()
