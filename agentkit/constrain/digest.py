"""Digests of compiled templates: a fingerprint of every MaskBench schema's template, to hold the compiler's output
fixed while its code changes.

A template's digest is a hash over its tree (node kinds, literal texts, slot regexes, token caps and names, repeat
bounds and separators) plus the number of distinct node objects (how much the DAG shares) and its ``meta``. A schema
that does not compile digests as its error (type, keyword, pointer, detail). Compiling runs without a deadline
(``CompileLimits(max_seconds=None)``), so a digest never depends on how loaded the machine is.

Run ``python -m agentkit.constrain.digest DATA_DIR --out FILE`` to write the digests of every ``*.json`` in
``DATA_DIR`` (the MaskBench folder) and ``--check FILE`` to compare against a file written before (``--step N``:
every N-th file only). The reference is ``tests/constrain/data/template_digests.json``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from pathlib import Path
from typing import Any

from ..errors import UnsupportedSchemaError
from .limits import CompileLimits
from .nodes import Choice, Lit, Node, Repeat, Seq, Slot, Template

NO_DEADLINE = CompileLimits(max_seconds=None)
# each schema is compiled under these option sets (the default, the other JSON style, OpenAI-style strict)
VARIANTS: dict[str, dict[str, Any]] = {"default": {}, "compact": {"style": "compact"}, "strict": {"strict": True}}


def node_digest(root: Node) -> tuple[str, int]:
    """(hex sha256 of the tree, number of distinct node objects in it); shared subtrees are hashed once."""
    memo: dict[int, str] = {}

    def h(n: Node) -> str:
        got = memo.get(id(n))
        if got is not None:
            return got
        if isinstance(n, Lit):
            parts: list[Any] = ["L", n.text]
        elif isinstance(n, Slot):
            parts = ["S", n.regex, n.max_tokens, n.name]
        elif isinstance(n, Seq):
            parts = ["Q", *(h(x) for x in n.items)]
        elif isinstance(n, Choice):
            parts = ["C", *(h(x) for x in n.options)]
        elif isinstance(n, Repeat):
            parts = ["R", h(n.item), n.sep, n.min, n.max]
        else:
            raise TypeError(f"not a template node: {type(n).__name__}")
        d = hashlib.sha256(json.dumps(parts, ensure_ascii=False).encode()).hexdigest()
        memo[id(n)] = d
        return d

    return h(root), len(memo)


def template_digest(t: Template) -> str:
    """One string for a compiled template: tree hash, distinct nodes, meta."""
    tree, n = node_digest(t.root)
    return f"{tree[:32]}:{n}:{json.dumps(t.meta, sort_keys=True)}"


def error_digest(e: UnsupportedSchemaError) -> str:
    """One string for a refusal: its type, keyword, pointer and detail."""
    return f"error:{type(e).__name__}:{e.keyword}:{e.pointer}:{e.detail}"[:400]


def short(text: str) -> str:
    """20 hex digits of the sha256 of a digest string (what the reference file stores)."""
    return hashlib.sha256(text.encode()).hexdigest()[:20]


def schema_digest(schema: Any, **options: Any) -> str:
    """``t`` + the short digest of ``schema``'s template compiled with ``options`` (no deadline), or ``e`` + that of
    the error it raises."""
    from .compiler import compile_schema_uncached

    try:
        return "t" + short(template_digest(compile_schema_uncached(schema, limits=NO_DEADLINE, **options)))
    except UnsupportedSchemaError as e:
        return "e" + short(error_digest(e))


def passes(schema: Any, tests: list[dict]) -> bool:
    """Whether the template (default options, no deadline) accepts every valid and rejects every invalid test."""
    from .canonical import canonical_json
    from .compiler import compile_schema_uncached
    from .matcher import tree_matches

    try:
        tpl = compile_schema_uncached(schema, limits=NO_DEADLINE)
        return all(tree_matches(tpl, canonical_json(t["data"], schema)) == bool(t["valid"]) for t in tests)
    except Exception:  # noqa: BLE001 -- any failure to compile or to match is a failure of this schema
        return False


def file_digests(path: Path) -> dict[str, Any]:
    """``{"variant": digest, ..., "passed": bool}`` for one MaskBench file."""
    doc = json.loads(path.read_text())
    out: dict[str, Any] = {k: schema_digest(doc["schema"], **opts) for k, opts in VARIANTS.items()}
    out["passed"] = passes(doc["schema"], doc.get("tests") or [])
    return out


def all_digests(data_dir: Path, step: int = 1, names: list[str] | None = None) -> dict[str, Any]:
    """Digests of every ``step``-th ``*.json`` file in ``data_dir`` (sorted by name; of ``names`` when given), and
    the coverage they add up to."""
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 20000))
    names = sorted(names if names is not None else (p.name for p in data_dir.glob("*.json")))[::step]
    per = {name: file_digests(data_dir / name) for name in names}
    passed = sum(v["passed"] for v in per.values())
    return {"schemas": len(per), "passed": passed, "coverage": round(passed / len(per), 4) if per else 0.0,
            "files": per}


def diff(reference: dict[str, Any], got: dict[str, Any]) -> list[str]:
    """Lines naming every file and variant of ``got`` whose digest or pass differs from ``reference`` (empty when
    identical); with every file of the reference in ``got``, the totals are compared too."""
    out = []
    for name, have in got["files"].items():
        want = reference["files"].get(name)
        if want is None:
            out.append(f"{name}: not in the reference")
            continue
        out += [f"{name} {k}: {want.get(k)!r} != {have[k]!r}" for k in have if have[k] != want.get(k)]
    if set(got["files"]) >= set(reference["files"]):
        out += [f"{k}: {reference[k]!r} != {got[k]!r}" for k in ("schemas", "passed", "coverage")
                if reference[k] != got[k]]
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m agentkit.constrain.digest", description=__doc__.split("\n\n")[0])
    ap.add_argument("data_dir", type=Path, help="the MaskBench folder (*.json)")
    ap.add_argument("--step", type=int, default=1, help="only every STEP-th file (sorted by name)")
    ap.add_argument("--out", type=Path, help="write the digests here")
    ap.add_argument("--check", type=Path, help="compare with digests written before; exit 1 on any difference")
    a = ap.parse_args(argv)
    ref = json.loads(a.check.read_text()) if a.check else None
    res = all_digests(a.data_dir, a.step, sorted(ref["files"]) if ref else None)  # --check: the reference's files
    print(f"{res['schemas']} schemas, {res['passed']} pass, coverage {res['coverage']}")
    if a.out:
        a.out.write_text(json.dumps(res, indent=1, sort_keys=True, ensure_ascii=False) + "\n")
    if a.check:
        lines = diff(ref, res)
        print("\n".join(lines[:50]) or "identical")
        return 1 if lines else 0
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
