"""The symlink-swap race against the workspace file tools (issue 36, item 5).

A swapper process exchanges a directory inside the workspace (``d``, holding ``f.txt`` = INSIDE) with a symlink to a
directory outside it (``l`` -> outside/, holding ``f.txt`` = INSIDE, SECRET and ``only_outside.txt``) in a tight loop
(``renameat2(RENAME_EXCHANGE)`` through ctypes; three renames where libc lacks it) while this process calls
``read_file``, ``write_file``, ``list_files``, ``search_text`` and ``apply_edits`` on paths under ``d/``.
Counts: calls, successes, typed errors (``AgentkitError``: ``WorkspaceError``, ``EditError``), untyped errors, and reads, listings or writes that
reached the outside directory (all must be 0).

    python evals/race_workspace.py --seconds 10 --out evals/results/sandbox/race_workspace.json
    python evals/race_workspace.py --seconds 10 --impl /work/main/tools/workspace.py   # the code before the fix
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from agentkit.errors import AgentkitError

OUTSIDE_TEXT = "INSIDE\nSECRET\n"  # an edit of d/f.txt (INSIDE -> INSIDE, edited) would apply here too
SWAPPER = r"""
import ctypes, os, sys, time
a, b, stop = os.fsencode(sys.argv[1]), os.fsencode(sys.argv[2]), time.monotonic() + float(sys.argv[3])
libc = ctypes.CDLL(None, use_errno=True)
swap = getattr(libc, "renameat2", None)
n = 0
while time.monotonic() < stop:
    if swap is not None:
        if swap(-100, a, -100, b, 2) != 0:  # AT_FDCWD, RENAME_EXCHANGE
            raise OSError(ctypes.get_errno(), "renameat2")
    else:
        os.rename(a, a + b".t"); os.rename(b, a); os.rename(a + b".t", b)
    n += 1
print(n, "renameat2" if swap is not None else "rename")
"""


def _setup(base: Path) -> tuple[Path, Path]:
    root, outside = base / "ws", base / "outside"
    (root / "d").mkdir(parents=True)
    outside.mkdir()
    (root / "d" / "f.txt").write_text("INSIDE\n")
    (outside / "f.txt").write_text(OUTSIDE_TEXT)
    (outside / "only_outside.txt").write_text("SECRET\n")
    (root / "l").symlink_to(outside, target_is_directory=True)
    return root, outside


def _workspace_class(impl: str | None):
    if impl is None:
        from agentkit.tools.workspace import Workspace

        return Workspace
    spec = importlib.util.spec_from_file_location("workspace_under_test", impl)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.Workspace


def _one(ws, i: int, counts: Counter) -> None:
    """One round of calls; a result that shows the outside directory is counted, never raised."""
    calls = (
        ("read", lambda: ws.read_file("d/f.txt")),
        ("write", lambda: ws.write_file(f"d/w{i}.txt", "x\n")),
        ("list", lambda: ws.list_files("d")),
        ("search", lambda: ws.search_text("SECRET|INSIDE", "d/**")),
        ("edit", lambda: ws.apply_edits("d/f.txt\n<<<<<<< SEARCH\nINSIDE\n=======\nINSIDE\nedited\n>>>>>>> REPLACE\n")),
    )
    for kind, call in calls:
        counts["calls"] += 1
        try:
            out = call()
        except AgentkitError as err:  # WorkspaceError, or EditError for an edit
            counts["typed_errors"] += 1
            counts[f"typed:{type(err).__name__}"] += 1
            continue
        except Exception as err:  # noqa: BLE001 -- counted: the point of the eval
            counts["untyped_errors"] += 1
            counts[f"untyped:{type(err).__name__}"] += 1
            continue
        counts["ok"] += 1
        if kind != "edit" and ("SECRET" in str(out) or "only_outside" in str(out)):
            counts[f"outside_{kind}s"] += 1


def race(seconds: float, impl: str | None = None) -> dict[str, object]:
    """Run the race for ``seconds``; the counts (``outside_*`` keys are present, 0 when nothing leaked)."""
    Workspace = _workspace_class(impl)
    counts: Counter = Counter()
    with tempfile.TemporaryDirectory(prefix="agentkit-race-") as tmp:
        root, outside = _setup(Path(tmp))
        ws = Workspace(root)
        swapper = subprocess.Popen([sys.executable, "-c", SWAPPER, str(root / "d"), str(root / "l"), str(seconds)],
                                   stdout=subprocess.PIPE, text=True)  # fmt: skip
        i = 0
        t0 = time.monotonic()
        while swapper.poll() is None:
            _one(ws, i, counts)
            i += 1
        swaps, how = (swapper.stdout.read().split() + ["0", "?"])[:2]
        leaked = sorted(set(os.listdir(outside)) - {"f.txt", "only_outside.txt"})
        counts["outside_writes"] += len(leaked)
        counts["outside_edits"] += (outside / "f.txt").read_text() != OUTSIDE_TEXT
        for key in ("outside_reads", "outside_lists", "outside_searchs", "outside_edits", "untyped_errors"):
            counts[key] += 0
        return {"seconds": round(time.monotonic() - t0, 2), "swaps": int(swaps), "swap_call": how,
                "impl": impl or "agentkit.tools.workspace", "rounds": i, **dict(sorted(counts.items()))}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--impl", default=None, help="a workspace.py to test instead of the installed one")
    ap.add_argument("--out", default=None, help="write the counts here as JSON")
    args = ap.parse_args()
    result = race(args.seconds, args.impl)
    text = json.dumps(result, indent=2)
    print(text)
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(text + "\n")


if __name__ == "__main__":
    main()
