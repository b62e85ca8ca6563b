"""Every file under ``evals/results`` is cited by a document, and the folder stays small.

A document is the README, ``docs/*.md``, ``evals/README.md`` or an adapter's ``MODEL_CARD.md``. A citation is a
path that starts with ``evals/results/``; it may name several files with ``*``, ``{a,b}`` or a ``<name>``
placeholder, and a ``.json`` citation covers the file stored as ``.json.gz``. The folders other work writes into
(``IN_USE``) count as cited when a document names the folder itself.
"""

from __future__ import annotations

import fnmatch
import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = "evals/results"
MAX_KB = 25 * 1024
IN_USE = ("repair", "extract_user", "user_tools", "replies")
CITATION = re.compile(r"evals/results/[\w./*{},<>-]*")


def documents() -> list[Path]:
    return [ROOT / "README.md", ROOT / "evals/README.md", *sorted((ROOT / "docs").glob("*.md")),
            *sorted((ROOT / "adapters").glob("*/MODEL_CARD.md"))]


def expand(citation: str) -> list[str]:
    """The glob patterns one citation stands for: ``{a,b}`` alternatives spelled out, ``<name>`` as ``*``, the
    sentence's closing punctuation dropped."""
    citation = re.sub(r"<\w+>", "*", citation.rstrip(".,"))
    brace = re.search(r"\{([^{}]*)\}", citation)
    if brace is None:
        return [citation]
    head, tail = citation[:brace.start()], citation[brace.end():]
    return [p for alt in brace.group(1).split(",") for p in expand(head + alt + tail)]


def citations(texts: list[str]) -> set[str]:
    return {p for text in texts for c in CITATION.findall(text) for p in expand(c)}


def uncited(files: list[str], cited: set[str]) -> list[str]:
    """The files (paths from the repository's root) no pattern in ``cited`` names."""
    folders = {f"{RESULTS}/{name}/" for name in IN_USE} & cited
    out = []
    for path in files:
        forms = {path, path.removesuffix(".gz")}
        if any(path.startswith(folder) for folder in folders):
            continue
        if not any(fnmatch.fnmatchcase(form, pattern) for form in forms for pattern in cited):
            out.append(path)
    return out


def result_files() -> list[str]:
    listed = subprocess.run(["git", "ls-files", RESULTS], cwd=ROOT, capture_output=True, text=True, check=True)
    return [p for p in listed.stdout.splitlines() if p != f"{RESULTS}/README.md" and (ROOT / p).is_file()]


def test_the_citation_patterns_expand_and_match():
    assert expand("evals/results/a/x_{one,two}.json.") == ["evals/results/a/x_one.json", "evals/results/a/x_two.json"]
    assert expand("evals/results/a/load_<run>.json") == ["evals/results/a/load_*.json"]
    cited = citations(["see `evals/results/a/b.json` and evals/results/a/c_*.txt", "evals/results/repair/"])
    files = ["evals/results/a/b.json.gz", "evals/results/a/c_1.txt", "evals/results/a/d.json",
             "evals/results/repair/x.json", "evals/results/replies/y.json"]
    assert uncited(files, cited) == ["evals/results/a/d.json", "evals/results/replies/y.json"]


def test_every_result_file_is_cited_by_a_document():
    cited = citations([doc.read_text(encoding="utf-8") for doc in documents()])
    assert uncited(result_files(), cited) == []


def test_the_results_stay_small():
    kb = int(subprocess.run(["du", "-sk", RESULTS], cwd=ROOT, capture_output=True, text=True,
                            check=True).stdout.split()[0])
    assert kb <= MAX_KB, f"{RESULTS} is {kb} KB, over {MAX_KB} KB"
