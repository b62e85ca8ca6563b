"""Issue 18's adversarial schemas: how long each takes to build (schema → template → token automaton) or to be
refused with a typed error, under the default CompileLimits.

    python evals/bench_constraint_limits.py [--tokenizer tiny|default] [--only int64,ab20]

Prints one line per case: built (compile and index seconds) or the error's class and message.
"""

from __future__ import annotations

import argparse
import time

INT64 = {"type": "integer", "minimum": -9223372036854775808, "maximum": 9223372036854775807}


def _deep(n: int) -> dict:
    d: dict = {"type": "integer"}
    for _ in range(n):
        d = {"type": "object", "properties": {"a": d}, "required": ["a"]}
    return d


CASES = {
    "int64": INT64,
    "int32": {"type": "integer", "minimum": -2147483648, "maximum": 2147483647},
    "ab20": {"type": "string", "pattern": "^[ab]*a[ab]{20}$"},
    "max2^53+1": {"type": "number", "maximum": 9007199254740993},
    "exmax1e20": {"type": "number", "exclusiveMaximum": 1e20},
    "min1e308": {"type": "number", "minimum": 1e308},
    "sS256": {"type": "string", "pattern": "^[\\s\\S]{256}$"},
    "maxlen256": {"type": "string", "maxLength": 256},
    "max1e999": {"type": "number", "maximum": float("inf")},
    "nan": {"type": "number", "minimum": float("nan")},
    "const_surr": {"const": "\ud800"},
    "enum10k": {"enum": [f"item-{i}" for i in range(10000)]},
    "6x15k": {"type": "object", "properties": {f"p{j}": {"enum": [f"v{j}-{i}" for i in range(15000)]}
                                               for j in range(6)}, "required": [f"p{j}" for j in range(6)]},
    "opt1000": {"type": "object", "properties": {f"p{i}": {"type": "integer"} for i in range(1000)}},
    "opt1000closed": {"type": "object", "properties": {f"p{i}": {"type": "integer"} for i in range(1000)},
                      "additionalProperties": False},
    "tool_i64": {"type": "object", "properties": {"name": {"const": "f"}, "arguments": {
        "type": "object", "properties": {"x": INT64}, "required": ["x"]}}, "required": ["name", "arguments"]},
    "deep40": _deep(40),
    "deep1000": _deep(1000),
}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tokenizer", choices=["tiny", "default"], default="default")
    ap.add_argument("--only", default="", help="comma-separated case names")
    args = ap.parse_args()
    from agentkit.constrain.compiler import compile_schema
    from agentkit.constrain.runtime import TokenConstraint
    from agentkit.constrain.vocab import token_vocab

    if args.tokenizer == "tiny":
        from agentkit.models.tiny import tiny_tokenizer

        tok = tiny_tokenizer()
    else:
        from agentkit.models.default import default_tokenizer

        tok = default_tokenizer()
    vocab = token_vocab(tok)
    for name in args.only.split(",") if args.only else CASES:
        t0 = time.perf_counter()
        try:
            tpl = compile_schema(CASES[name])
            t1 = time.perf_counter()
            c = TokenConstraint(tpl, vocab, tok)
            s = c.start()
            c.allowed(s)
            c.min_tokens(s)
            print(f"{name:14s} built: compile {t1 - t0:.2f} s, token index {time.perf_counter() - t1:.2f} s",
                  flush=True)
        except Exception as e:  # noqa: BLE001 -- the point is which error, and how fast
            msg = str(e).encode("utf-8", "backslashreplace").decode()
            print(f"{name:14s} {type(e).__name__} after {time.perf_counter() - t0:.2f} s: {msg[:100]}", flush=True)


if __name__ == "__main__":
    main()
