"""Run a script as a user other than root (uid 65534), for the sandbox tests that must hold for both.

The script gets ``WORK/repo`` and the isolation mode as its arguments and prints one JSON line last. Root starts
it in a private mount namespace: where the interpreter lies under a directory others cannot enter (pyenv under a
0700 ``/root``), a tmpfs over that directory holds just the interpreter's tree, bound back, for the run.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

import pytest

NOBODY = 65534
CAN_SWITCH_USER = bool(hasattr(os, "getuid") and os.getuid() == 0 and shutil.which("setpriv")
                       and shutil.which("unshare"))  # fmt: skip
NEEDS_ROOT = pytest.mark.skipif(not CAN_SWITCH_USER, reason="needs root (to become another user), setpriv, unshare")
_OUTER = f"""
set -e
if [ -n "$HIDDEN" ]; then
  mkdir -p "$WORK/view" && mount --bind "$HIDDEN/$REL" "$WORK/view"
  mount -t tmpfs -o mode=755 tmpfs "$HIDDEN" && mkdir -p "$HIDDEN/$REL" && mount --bind "$WORK/view" "$HIDDEN/$REL"
fi
exec setpriv --reuid={NOBODY} --regid={NOBODY} --clear-groups env HOME="$WORK" "$PY" "$WORK/run.py" "$WORK/repo" "$MODE"
"""


def _hidden_ancestor(path: Path) -> Path | None:
    """The outermost ancestor of ``path`` that other users cannot enter (no o+x), if any."""
    for parent in reversed(path.parents):
        if parent != Path("/") and not parent.stat().st_mode & 0o001:
            return parent
    return None


def run_as_nobody(script: str, mode: str, setup: Callable[[Path], None]) -> tuple[dict, Path]:
    """Make ``WORK/repo`` (``setup(repo)`` fills it), run ``script`` as uid 65534 and return its last JSON line and
    ``WORK`` (the caller removes it). Skips the test where another user cannot be run here."""
    work = Path(tempfile.mkdtemp(prefix="agentkit-nonroot-", dir="/tmp"))
    (work / "repo" / "tests").mkdir(parents=True)
    setup(work / "repo")
    (work / "run.py").write_text(script)
    for p in [work, *work.rglob("*")]:
        os.lchown(p, NOBODY, NOBODY)
    py = Path(sys.executable)
    hidden = _hidden_ancestor(Path(os.path.realpath(py)))
    env = {**os.environ, "WORK": str(work), "PY": str(py), "MODE": mode, "HIDDEN": str(hidden or ""),
           "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    if hidden is not None:
        env["REL"] = str(Path(os.path.realpath(py)).relative_to(hidden).parts[0])
    proc = subprocess.run(["unshare", "-m", "--propagation", "private", "sh", "-c", _OUTER], check=False, env=env,
                          capture_output=True, text=True, timeout=300)  # fmt: skip
    if proc.returncode != 0 and not proc.stdout.strip():
        shutil.rmtree(work, ignore_errors=True)
        pytest.skip(f"could not run as uid {NOBODY} here: {proc.stderr.strip()[-300:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1]), work
