"""A coding assistant. Each request is planned first (``agentkit.repair.request``): one constrained extraction step
whose values are grounded in the request and the repository (the action is one of repair / rename / docstring /
other, narrowed to the actions the request names; the names are the repository's own or spans of the request).
Then, in this order (``agentkit.repair.assistant``):

- a **rename** ("rename load_config to read_config"): a deterministic refactoring over Python's tokens, every use in the
  non-test code; refused when the new name is taken, is a builtin, or the tests use the old one;
- a **docstring** ("add a docstring to parse_row"): the function pinned by a code-edit template, the model writing only
  the docstring's one line under token masks; marker text and runaway repeats refused;
- a request that names a bug, a failure or a fix ("make the failing test pass"): the repair loop
  (``agentkit.repair``): it runs the tests, localises the fault (traceback frames, then Ochiai over per-test
  coverage), drafts candidate lines with the model under a code-edit template (and the mutation operators', and
  literals rewritten from the failing assertion's expected and actual values), validates each on a scratch copy in
  the sandbox, and writes only the one that passes every test.

A rename or a docstring is checked on scratch copies too (the file parses, no test that passed fails) before it is
written. Test files and the data they read stay read-only; the diff is printed. If nothing passes, the repository is
left exactly as it was and the exit status is 1.

Any other request goes to the general agent: it plans, reads, edits with constrained SEARCH/REPLACE edits, runs
the tests, and replies with a summary (AR). Every tool is confined to one workspace folder
(``tools.workspace.Workspace``).

The edit tool is a *templated tool*: the tool-call step only chooses ``apply_edits``; the edit itself is decoded
in a ``tool_input`` step under ``search_replace_template`` over the workspace files as they are at that moment, so
a SEARCH can only be verbatim lines of a real file and every proposed edit applies.

    python examples/coding_assistant.py REPO_DIR "make the failing test pass" [--repair-adapter PATH|none]
    AGENTKIT_WORKSPACE=REPO_DIR agentkit run examples/coding_assistant.py:agent "rename foo to bar everywhere"
"""

from __future__ import annotations

import copy
import os
import sys
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make the repository's top-level packages (tools/) importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


from agentkit.tools.sandbox import require
from agentkit.tools.workspace import Workspace

from agentkit import (
    Agent,
    AgentRunError,
    DecodeConfig,
    Limits,
    RoutingPolicy,
    RunContext,
    Template,
    Tool,
    WorkspaceError,
)
from agentkit.constrain.edits import DIVIDER, REPLACE_MARK, file_lines, search_replace_template
from agentkit.repair.request import REPAIR_REQUEST  # noqa: F401  (the routing's bug-word fallback; tests read it)

INSTRUCTIONS = """You are a coding assistant working inside one repository folder.
Work in small steps: list the files, read the ones that matter, change code with apply_edits, then run_tests to
check the change. When the tests pass (or you cannot do better), answer final_answer."""

EDIT_PROMPT = """Write one edit that makes the change: the file path on its own line, then a line <<<<<<< SEARCH,
the lines to change copied exactly from the file, a line =======, the corrected lines, and a line >>>>>>> REPLACE."""
# No placeholder text and no worked example: the model copied a placeholder ("the new lines") into 2 of the 6 eval
# repositories' files (evals/results/examples/coding_agent_ar_one_round.json), and a worked example's line ("return a +
# b") into 2 of 6.

#: Bounds of one edit: a SEARCH of at most ``MAX_SEARCH_LINES`` lines, a REPLACE of at most ``MAX_REPLACE_TOKENS``.
MAX_SEARCH_LINES = 8
MAX_REPLACE_TOKENS = 256
MAX_EDIT_FILES = 40  # text files offered to the edit template (sorted paths; the rest are left out)
DECODE_MAX_NEW_TOKENS = 256  # plan, tool calls, reply (the reply ends at a loop: the SDK's stop_loops default)
# DecodeConfig(stop_loops=4) for every step was tried: a plan that loops, cut, is not JSON, and its sampled retries
# looped again (2 of 6 eval runs stopped; evals/results/examples/coding_agent_ar_loops_all.json)


def edit_template(ws: Workspace, paths: list[str] | None = None) -> Template:
    """The SEARCH/REPLACE template over the current text of ``paths`` (default: the workspace's text files).

    One edit per call (``max_edits=1``: two edits in one response could overlap, and then none applies).
    ``meta["max_new_tokens"]`` is the block's worst-case length (every token is at least one byte), so the
    ``tool_input`` step never cuts an edit short (a cut edit would not parse, let alone apply).
    """
    files: dict[str, str] = {}
    for rel in paths if paths is not None else ws.list_files():
        if len(files) >= MAX_EDIT_FILES:
            break
        try:
            full = ws.resolve(rel)
            if not full.is_file() or full.stat().st_size > ws.max_file_bytes:
                continue
            data = full.read_bytes()
            if b"\x00" not in data[:8192]:
                files[rel] = data.decode("utf-8")
        except (WorkspaceError, OSError, UnicodeDecodeError):  # a listing note, unreadable, not UTF-8: skipped
            continue
    template = search_replace_template(files, max_edits=1, max_search_lines=MAX_SEARCH_LINES,
                                       max_replace_tokens=MAX_REPLACE_TOKENS)
    template.__dict__.pop("regex", None)  # cached_property: rebuilt from the new tree
    template.__dict__.pop("_compiled", None)
    longest = 0
    for path, text in files.items():
        sizes = [len(line.encode()) for line in file_lines(text)]
        window = max((sum(sizes[i:i + MAX_SEARCH_LINES]) for i in range(len(sizes))), default=0)
        longest = max(longest, len(path.encode()) + window)
    marks = len("\n<<<<<<< SEARCH\n=======\n>>>>>>> REPLACE\n")
    template.meta["max_new_tokens"] = longest + marks + MAX_REPLACE_TOKENS + MAX_LINE_OVERRUN + 16
    return template


#: A slot may outrun its token budget until it can end, which for REPLACE is the next newline; a line still open
#: after ``MAX_LINE_OVERRUN`` more tokens is cut by the step's budget and ``close_cut_edit`` closes the edit.
MAX_LINE_OVERRUN = 128


def close_cut_edit(text: str) -> tuple[str, bool]:
    """An edit cut short inside its REPLACE part (by the token budget) closed at its last whole line.

    Constrained decoding makes every prefix of the output a prefix of a valid edit, so a cut edit is a complete
    SEARCH plus part of a REPLACE: dropping the unfinished line and adding the marker gives a valid edit.
    Returns the text and whether it was closed.
    """
    if f"\n{DIVIDER}\n" not in text or text.endswith(f"{REPLACE_MARK}\n"):
        return text, False
    head = text[: text.rfind("\n") + 1]
    return head + REPLACE_MARK + "\n", True


def returned(ctx: RunContext[Any], name: str) -> list[int]:
    """The positions in the run's messages of ``name``'s results (calls that returned, not failures)."""
    return [i for i, m in enumerate(ctx.messages) for p in getattr(m, "parts", ())
            if getattr(p, "part_kind", None) == "tool-return" and p.tool_name == name]


def until_returned(ctx: RunContext[Any], tool: Tool) -> Tool | None:
    """``prepare``: offered until it has returned once in this run (the file list does not change by itself)."""
    return None if returned(ctx, tool.name) else tool


def read_paths(ctx: RunContext[Any]) -> list[str]:
    """The paths ``read_file`` returned in this run, in the order first read."""
    ids = {p.tool_call_id for m in ctx.messages for p in getattr(m, "parts", ())
           if getattr(p, "part_kind", None) == "tool-return" and p.tool_name == "read_file"}
    paths = [p.args.get("path") for m in ctx.messages for p in getattr(m, "parts", ())
             if getattr(p, "part_kind", None) == "tool-call" and p.tool_call_id in ids]
    return list(dict.fromkeys(p for p in paths if isinstance(p, str)))


def edit_read_files(ws: Workspace, prepare: Any) -> Any:
    """``prepare`` for the edit tool: when ``prepare`` offers it, its template covers only the files read in this
    run (read before edit). Offered every file, the 135M model read ``stats.py`` and edited ``test_stats.py``."""

    def offer(ctx: RunContext[Any], tool: Tool) -> Tool | None:
        if prepare(ctx, tool) is None:
            return None
        paths = read_paths(ctx)
        narrowed = copy.copy(tool)
        narrowed.template_factory = lambda: edit_template(ws, paths)
        return narrowed

    return offer


def after(name: str, most: int | None = None) -> Any:
    """``prepare``: offered once ``name`` returned since this tool last did, and (``most``) while this tool has
    returned fewer times than that: the edit after a read, the tests after an edit. The 135M model, offered every
    tool at every step, ran ``run_tests`` 11 times and edited nothing; this is the workflow a small model can
    follow."""

    def prepare(ctx: RunContext[Any], tool: Tool) -> Tool | None:
        mine = returned(ctx, tool.name)
        if most is not None and len(mine) >= most:
            return None
        return tool if any(i > (mine[-1] if mine else -1) for i in returned(ctx, name)) else None

    return prepare


def build_agent(root: str | os.PathLike[str] | None = None, model: Any = None, *, max_iterations: int = 12,
                routing: RoutingPolicy | None = None, plan: bool = True, extra_tools: bool = False,
                test_timeout_s: float = 60, max_output_chars: int = 1500, on_repeat: str = "retry",
                workflow: bool = True, edit_rounds: int = 1) -> Agent:
    """The coding agent over the workspace ``root`` (default ``$AGENTKIT_WORKSPACE`` or the current directory).

    ``model``: an Engine, a Generator (e.g. a scripted ``FunctionModel``) or an http(s) URL; default the
    embedded model, with exact prompt-prefix reuse (``EngineConfig.prefix_cache``, on by default: each step encodes only what the
    conversation gained since the last one). Each step kind takes its calibrated mode (``RoutingPolicy()``: on the
    default model on a CPU, verify for the plan, tool calls, edits and the greedy closing summary; ``routing``
    sends them elsewhere).
    Tools: ``list_files``, ``read_file``, ``apply_edits`` (templated), ``run_tests``; ``extra_tools`` adds
    ``search_text`` and ``write_file``. They are kept few and terse, and outputs short (``max_output_chars``),
    because every step re-reads the whole conversation (prefill dominates a small model's step on a CPU).
    ``on_repeat``: ``"retry"`` by default (a repeated ``run_tests`` is answered with "you already have that
    result: call a different tool", so the model moves on to reading or editing; a second repeat ends the run).
    ``workflow``: the tools are offered in a read, edit, test order (``Tool(prepare=...)``: the file list until it
    returned, the edit after a read, the tests after an edit, at most ``edit_rounds`` edits: without a cap three of
    the six eval tasks ran read, edit, test twice and hit ``max_iterations=10``); False offers every tool at every
    step.
    """
    root = root if root is not None else os.environ.get("AGENTKIT_WORKSPACE", os.getcwd())
    ws = Workspace(root, command_timeout_s=test_timeout_s, max_output_chars=max_output_chars)
    if model is None:
        from agentkit import default_engine

        model = default_engine()

    def list_files() -> list[str]:
        """List the files of the repository."""
        return ws.list_files()

    def read_file(path: str) -> str:
        """Read a file of the repository.

        Args:
            path: file path relative to the repository root
        """
        return ws.read_file(path)

    def apply_edits(edits: str) -> str:
        """Change a file with one SEARCH/REPLACE edit.

        Args:
            edits: the edit block
        """
        text, closed = close_cut_edit(edits)
        out = ws.apply_edits(text)
        return out + ("\n(the edit was cut short by the token budget: its last, unfinished line was dropped)"
                      if closed else "")

    def run_tests() -> dict[str, object]:
        """Run the repository's tests (pytest); returns exit_code (0: all pass) and output."""
        return ws.run_tests(["-q", "--tb=short", "-p", "no:cacheprovider", "-W", "ignore::DeprecationWarning"])

    tools = [
        Tool(list_files, retries=3, prepare=until_returned if workflow else None),
        Tool(read_file, retries=3),
        Tool(apply_edits, retries=3, template_factory=lambda: edit_template(ws), input_prompt=EDIT_PROMPT,
             prepare=edit_read_files(ws, after("read_file", edit_rounds)) if workflow else None),
        Tool(run_tests, retries=3, prepare=after("apply_edits") if workflow else None),
    ]
    if extra_tools:
        tools += [Tool(ws.search_text, retries=3), Tool(ws.write_file, retries=3)]
    agent = Agent(
        model,
        tools=tools,
        instructions=INSTRUCTIONS,
        routing=routing or RoutingPolicy(),
        limits=Limits(max_iterations=max_iterations),
        name="coding-assistant",
        plan=plan,
        decode=DecodeConfig(max_new_tokens=DECODE_MAX_NEW_TOKENS),
        output_retries=2,
        on_repeat=on_repeat,
        # after a read, the edit (the only tool left to choose) is weighed against the answer as the first step
        # is; "exclude_moved", the default, answered after the read on 5 of 6 tasks
        # (evals/results/examples/coding_agent_ar_exclude_moved.json)
        after_result="exclude_last" if workflow else None,
        # calibrated decisions on any weights: with the loop adapter's raw ones (trained on question-answering tools)
        # every run answered at its first decision; calibrated, it edited on 6 of 6 tasks
        # (evals/results/adapters/coding_agent_ar_lora_calibrated.json)
        calibrate=True,
    )
    agent.workspace = ws  # type: ignore[attr-defined]
    return agent


class _LazyAgent:
    """``agentkit run examples/coding_assistant.py:agent`` builds the agent (and loads the model) only when used;
    the workspace is ``$AGENTKIT_WORKSPACE`` (default: the current directory)."""

    def __call__(self) -> Agent:
        return build_agent()


agent = _LazyAgent()


def run_request(repo: str, task: str, model: Any = None, budget: Any = None, adapter: str | None = None) -> int:
    """``task`` planned and done on ``repo`` (``agentkit.repair.assistant.handle``): prints the plan, what was done
    and the diff; 0 when done, 1 when nothing was. ``adapter``: the repair loop drafter's repair adapter
    (``agentkit.repair.adapter.repair_engine``: None the default, ``"none"`` without one, or a folder); ignored
    when ``model`` is given."""
    from agentkit.repair import ModelDrafter
    from agentkit.repair.adapter import repair_engine, resolve
    from agentkit.repair.assistant import handle

    drafting = model
    if model is None:
        from agentkit import default_engine

        model = default_engine()
        drafting = model if resolve(adapter) is None else repair_engine(adapter)

    def general(root: Path, request: str) -> tuple[bool, str]:
        result = build_agent(root, model).run_sync(request)
        print(result.trace.render())
        return True, str(result.output)

    done = handle(repo, task, model, drafter=ModelDrafter(drafting, "hybrid"), budget=budget, general=general)
    print(f"plan: {done.plan.route} ({done.plan.why}; {done.plan.seconds:.1f} s)")
    print(done.summary)
    for step, seconds, detail in done.steps or []:
        print(f"  {step:12} {seconds:6.2f} s  {detail}")
    print(done.diff, end="")
    return 0 if done.done else 1


def main(argv: list[str]) -> int:
    adapter = None
    if "--repair-adapter" in argv[:-1]:
        i = argv.index("--repair-adapter")
        adapter, argv = argv[i + 1], argv[:i] + argv[i + 2:]
    if len(argv) != 2:
        print(__doc__.strip().splitlines()[-2].strip(), file=sys.stderr)
        return 2
    repo, task = argv
    try:  # the tests run sandboxed: say how, or say in one line why they cannot
        isolation = require(Workspace(repo).isolation)
        print(f"sandbox: {isolation} (what it enforces: docs/sandbox.md)")
        return run_request(repo, task, adapter=adapter)
    except WorkspaceError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except AgentRunError as e:
        print(f"run failed: {type(e).__name__}: {e}", file=sys.stderr)
        if e.trace is not None:
            print(e.trace.render())
        return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
