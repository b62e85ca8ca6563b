"""Structured output: JSON Schema → canvas template → token automaton (see :mod:`agentkit.constrain.compiler`).

``build_constraint`` runs the whole build bounded by ``CompileLimits`` and abandonable (``cancel``); ``compile_schema``
(the cached compiler: the same function as ``agentkit.compile_schema`` and ``constrain.compiler.compile_schema``) and
``CompileLimits`` are the other public names. Imports are lazy: the compiler pulls in no model code, the token
automaton needs torch.
"""

from __future__ import annotations

from typing import Any

from .limits import DEFAULT_LIMITS, CompileLimits

__all__ = ["DEFAULT_LIMITS", "CompileLimits", "build_constraint", "compile_schema"]


def __getattr__(name: str) -> Any:
    if name == "build_constraint":
        from .build import build_constraint

        return build_constraint
    if name == "compile_schema":
        from .compiler import compile_schema

        return compile_schema
    raise AttributeError(f"module 'agentkit.constrain' has no attribute {name!r}")
