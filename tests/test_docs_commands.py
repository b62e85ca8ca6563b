"""The commands the README and docs/*.md give run as written from a clone, as far as a check without a model can
tell: every ``agentkit`` subcommand and option named exists, the commands in code blocks parse, every
``python evals/...`` script and ``python -m ...`` module exists and its argparse parser accepts the command (required
options included), every ``python examples/...`` script exists, and the data paths they read (``--data``, ``--schema``, ``--bfcl``, the defaults too) exist in
the repository.

The python commands are parsed in one subprocess (this file run as a script): each script runs up to its
``parse_args``, which raises instead of returning, so nothing past the parser runs.
"""

from __future__ import annotations

import argparse
import itertools
import json
import re
import runpy
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
COMMAND = re.compile(r"^(?:cd \S+ && )?(?:[A-Z_]+=\S+\s+)*(?:agentkit|python3?)\s")
SHELLS = ("bash", "sh", "console", "")
# arguments that name data a command reads: they must exist in a clone
DATA_OPTIONS = ("--data", "--schema", "--bfcl", "--resume")
# options whose value a command writes; any other argument naming a results file is one it reads
WRITES = ("--out", "--plot", "--trace")
READ_FILES = re.compile(r"[\w./-]+\.(json|jsonl|json\.gz)")
DATA_FIELDS = ("data", "schema", "bfcl")
# paths a doc has the user create first (its own `git clone` line) or stand for the user's own
MADE_BY_THE_DOC = ("jsonschemabench/",)
# git-ignored: a path there is only there when an earlier command of the doc wrote it
NOT_SHIPPED = ("out/",)
# scripts without a parser to stop at (they run on the model): only that they exist; tests/integration runs them
EXAMPLES = "examples/"
# inline mentions that name an entry point, not a command to run as written, and where its commands are
REFERENCES = {
    "python -m agentkit.training": "the block-diffusion adapter's training; its commands are in its model card",
    "python -m agentkit.training.sft": "the loop and repair adapters' training; commands in their model cards",
    "python evals/user_tools.py": "the README points at evals/README.md#user-tools for its commands",
    "python -m agentkit.evals.repair": "named as the module behind `agentkit eval repair`; commands follow",
    "python -m agentkit.evals.repair_tasks": "named as the tasks' generator (docs/repair.md)",
    "python -m agentkit.training.drafter_train": "the drafter's training; its commands are in its model card",
}


def _placeholder(token: str) -> bool:
    """A synopsis's stand-in (``PROMPT``, ``DIR``, ``...``, ``[--opt X]``, ``<s>``): not meant to run as written."""
    return bool(re.fullmatch(r"[A-Z][A-Z0-9_.]*(:[A-Z]+)?|\.\.\.|.*[\[\]<>].*", token))


@dataclass(frozen=True)
class Command:
    where: str  # file:line
    block: bool  # in a code block (else an inline mention)
    argv: list[str]
    made: tuple[str, ...]  # what earlier commands of the same doc write (--out, cp's destination)

    @property
    def text(self) -> str:
        return " ".join(self.argv)

    def exists(self, value: str) -> bool:
        """Whether a path a command reads is there in a clone: shipped (out/ is git-ignored) or made before."""
        if _placeholder(value) or value.startswith(MADE_BY_THE_DOC) or value.startswith(self.made):
            return True
        return not value.startswith(NOT_SHIPPED) and (ROOT / value).exists()


def _doc_lines(path: Path) -> list[tuple[int, bool, str]]:
    """(line, in a code block, text) of every command-like line or code span, continuations joined (a code span
    may go on on the next line)."""
    found: list[tuple[int, bool, str]] = []
    lang, pending, start, prose = None, "", 0, ""
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        text = line.strip()
        if lang is None and not text.startswith("```"):
            start, prose = (start if prose else number), f"{prose} {text}".strip()
            if prose.count("`") % 2 == 0 or not text:
                found += [(start, False, m) for m in re.findall(r"`([^`]+)`", prose) if COMMAND.match(m + " ")]
                prose = ""
        elif text.startswith("```"):
            lang = None if lang is not None else text[3:].strip()
        elif lang in SHELLS and (pending or COMMAND.match(text) or text.startswith("cp ")):
            start = start if pending else number
            pending += text.removesuffix("\\") + " "
            if not text.endswith("\\"):
                found.append((start, True, pending))
                pending = ""
    return found


def doc_commands() -> list[Command]:
    """Every agentkit / python command in the README and docs/*.md, in order."""
    commands: list[Command] = []
    for path in DOCS:
        made: list[str] = []
        for number, block, text in _doc_lines(path):
            for part in re.split(r"&&|;|&(?=\s|$)", text):
                argv = shlex.split(part, comments=True)
                while argv and re.match(r"^[A-Z_]+=", argv[0]):
                    argv = argv[1:]
                if argv[:1] == ["cp"]:
                    made.append(argv[-1])
                elif argv and not (argv[0].startswith("python") and argv[1:2] == ["-m"]
                                   and argv[2] in ("venv", "pytest")):
                    commands.append(Command(f"{path.relative_to(ROOT)}:{number}", block, argv, tuple(made)))
                    made += [v for o, v in itertools.pairwise(argv) if o == "--out"]
    return commands


def _data_paths_exist(command: Command) -> list[str]:
    """The data and result files a command reads (``--data`` and the like, positional ``.json`` inputs) that a clone
    does not have at that point of its doc."""
    pairs = list(itertools.pairwise(["", *command.argv]))
    read = [f"{option} {value}" if option in DATA_OPTIONS else value for option, value in pairs
            if option in DATA_OPTIONS or (READ_FILES.fullmatch(value) and option not in WRITES)]
    return [f"{r} is not in a clone" for r in read if not command.exists(r.split()[-1])]


def _agentkit_problems(argv: list[str], full: bool) -> list[str]:
    import typer

    from agentkit.cli import app

    group = typer.main.get_command(app)
    args = [a for a in argv[1:] if a != "--debug"]
    if not args or _placeholder(args[0]):
        return []
    command = group.commands.get(args[0])
    if command is None:
        return [f"no subcommand {args[0]!r}"]
    known = {"--help"} | {o for p in command.params for o in (*p.opts, *p.secondary_opts)}
    problems = [f"no option {a}" for a in args[1:]
                if a.startswith("--") and a.split("=")[0] not in known and not _placeholder(a[2:])]
    synopsis = any(_placeholder(a) for a in args) or args[1:2] == [] or args[1].startswith("-")
    if args[0] == "eval" and not synopsis and any(a.startswith("--") for a in args) and "--data" not in args:
        problems += _eval_data_problems(args[1])
    if full and not problems:
        try:
            command.make_context(args[0], list(args[1:]))
        except typer.Exit:
            pass
        except typer.TyperException as e:  # the base of typer's usage and parameter errors
            problems.append(f"does not parse: {e}")
    return problems


def _eval_data_problems(suite: str) -> list[str]:
    """``agentkit eval SUITE`` without ``--data`` runs only for a suite with tasks of its own (``TASKS_DIR``)."""
    import importlib

    from agentkit.cli import SUITES

    if _placeholder(suite) or suite not in SUITES:
        return [] if _placeholder(suite) else [f"no eval suite {suite!r}"]
    module = importlib.import_module(f"agentkit.evals.{SUITES[suite]}")
    return [] if hasattr(module, "TASKS_DIR") else [f"the {suite} suite needs --data"]


def test_docs_have_commands():
    commands = doc_commands()
    assert sum(1 for c in commands if c.block) > 30
    assert any(c.argv[:2] == ["agentkit", "eval"] for c in commands)


def test_agentkit_commands_name_existing_options_and_parse():
    problems = []
    for c in doc_commands():
        if c.argv[0] == "agentkit":
            problems += [f"{c.where}: {c.text}: {p}" for p in _agentkit_problems(c.argv, full=c.block)]
            problems += [f"{c.where}: {p}" for p in _data_paths_exist(c)]
    assert not problems, "\n".join(problems)


def test_python_commands_exist_and_parse():
    commands = [c for c in doc_commands() if c.argv[0].startswith("python") and c.text not in REFERENCES
                and not any(_placeholder(a) for a in c.argv[1:])]
    todo = [(c.where, c.argv, c.made) for c in commands]
    assert len(todo) > 20
    missing = [f"{c.where}: {p}" for c in commands for p in _data_paths_exist(c)]
    assert not missing, "\n".join(missing)
    done = subprocess.run([sys.executable, __file__], input=json.dumps(todo), capture_output=True, text=True,
                          cwd=ROOT, timeout=600, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    problems = json.loads(done.stdout.splitlines()[-1])
    assert not problems, "\n".join(problems)


def test_references_are_still_in_the_docs():
    named = {c.text for c in doc_commands()}
    assert set(REFERENCES) <= named, set(REFERENCES) - named


def test_a_path_only_an_earlier_command_writes_counts_as_made():
    first, second = Command("a.md:1", True, ["python", "x.py", "--out", "out/d"], ()), None
    second = Command("a.md:2", True, ["python", "y.py", "--data", "out/d/val.jsonl"], ("out/d",))
    assert not first.exists("out/d/val.jsonl") and second.exists("out/d/val.jsonl")
    assert not _data_paths_exist(second) and _data_paths_exist(Command("a.md:3", True, second.argv, ()))
    assert not first.exists("evals/no-such-folder") and first.exists("evals/data/bfcl")


class _Parsed(Exception):
    def __init__(self, namespace: object):
        super().__init__("parsed")
        self.namespace = namespace


def _stop_at_the_parser() -> None:
    """``parse_args`` (and a direct ``parse_known_args``) parse as usual, then raise ``_Parsed``."""
    parse_args, parse_known = argparse.ArgumentParser.parse_args, argparse.ArgumentParser.parse_known_args
    inside = [0]

    def parse(self, args=None, namespace=None):
        inside[0] += 1
        try:
            result = parse_args(self, args, namespace)
        finally:
            inside[0] -= 1
        raise _Parsed(result)

    def known(self, args=None, namespace=None):
        result = parse_known(self, args, namespace)
        if not inside[0]:
            raise _Parsed(result[0])
        return result

    argparse.ArgumentParser.parse_args = parse
    argparse.ArgumentParser.parse_known_args = known


def _parse_one(command: Command) -> str | None:
    """None when the command's parser accepts it (and the data it names exists), else what is wrong."""
    import contextlib
    import importlib.util
    import io

    argv = command.argv
    if argv[1] == "-m":
        if importlib.util.find_spec(argv[2]) is None:
            return f"no module {argv[2]}"
        target, run = argv[2], lambda: runpy.run_module(argv[2], run_name="__main__", alter_sys=True)
    else:
        script = ROOT / argv[1]
        if not script.is_file():
            return f"no script {argv[1]}"
        if argv[1].startswith(EXAMPLES):
            return None
        target, run = argv[1], lambda: runpy.run_path(str(script), run_name="__main__")
        sys.path.insert(0, str(script.parent))
    sys.argv = [target, *argv[2 + (argv[1] == "-m"):]]
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            run()
    except _Parsed as parsed:
        fields = vars(parsed.namespace)
        missing = [f"{k}={fields[k]} is not in a clone" for k in DATA_FIELDS
                   if isinstance(fields.get(k), (str, Path)) and not command.exists(str(fields[k]))]
        return "; ".join(missing) or None
    except SystemExit as e:
        return f"exit {e.code}: {err.getvalue().strip().splitlines()[-1:]}" if e.code else None
    except Exception as e:  # noqa: BLE001 -- a script that fails before its parser: the message is the finding
        return f"{type(e).__name__}: {e}"
    return None


def _main() -> None:
    _stop_at_the_parser()
    problems = []
    for where, argv, made in json.loads(sys.stdin.read()):
        command = Command(where, True, argv, tuple(made))
        problem = _parse_one(command)
        if problem:
            problems.append(f"{where}: {command.text}: {problem}")
    print(json.dumps(problems))


if __name__ == "__main__":
    _main()
