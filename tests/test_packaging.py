"""Packaging: every package of the tree is installed, under ``agentkit``, and the version is written once."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import agentkit

ROOT = Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))


def _packages_on_disk() -> set[str]:
    found = set()
    mapping = {"agentkit": ROOT / "agentkit", **{k: ROOT / v for k, v in PYPROJECT["tool"]["setuptools"]["package-dir"].items()}}
    for name, base in mapping.items():
        for init in base.rglob("__init__.py"):
            rel = init.parent.relative_to(base).parts
            found.add(".".join([name, *rel]))
    return found


def test_every_package_on_disk_is_installed_and_only_under_agentkit():
    listed = set(PYPROJECT["tool"]["setuptools"]["packages"])
    assert listed == _packages_on_disk()
    assert all(p == "agentkit" or p.startswith("agentkit.") for p in listed)


def test_the_version_is_written_once():
    assert PYPROJECT["project"]["dynamic"] == ["version"] and "version" not in PYPROJECT["project"]
    assert PYPROJECT["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "agentkit.__version__"}
    assert re.fullmatch(r"\d+\.\d+\.\d+", agentkit.__version__)
    sources = [p for p in (ROOT / "agentkit").rglob("*.py")] + list((ROOT / "serving").rglob("*.py"))
    written = [p for p in sources if re.search(r"version\s*=\s*[\"']\d+\.\d+\.\d+", p.read_text(encoding="utf-8"))]
    assert written == [], written


def test_the_code_imports_the_installed_names():
    """Code says ``agentkit.serving`` / ``agentkit.tools``, never the repo's folder names."""
    bad = re.compile(r"^\s*(from|import) (serving|tools)\b", re.MULTILINE)
    files = [*ROOT.glob("agentkit/**/*.py"), *ROOT.glob("serving/**/*.py"), *ROOT.glob("tools/**/*.py"),
             *ROOT.glob("tests/**/*.py"), *ROOT.glob("evals/**/*.py"), *ROOT.glob("examples/**/*.py")]
    offenders = [str(p.relative_to(ROOT)) for p in files if bad.search(p.read_text(encoding="utf-8"))]
    assert offenders == []
