"""Which literal values (enum members, property names) a list of schemas accepts: the check the layout builder runs
on each enum member and on each listed property name under ``propertyNames``."""

from __future__ import annotations

from typing import Any

import jsonschema

from ..errors import UnsupportedSchemaError
from .canonical import Resolver
from .dnf import ALL_TYPES, type_of, vkey
from .limits import current


class LiteralCheck:
    """Validation of literal values against ``(schema, pointer)`` conjunctions of one root schema (``$ref`` s resolve
    against it). Plain type/enum/const schemas are checked directly; anything else by a jsonschema validator."""

    def __init__(self, root: Any, res: Resolver) -> None:
        self.root, self.res = root, res
        self._validator = None

    def _literal_only(self, conj) -> list | None:
        """The schemas behind ``conj`` when they hold only type/enum/const and annotations, else None."""
        out, todo, seen = [], [s for s, _ in conj], set()
        while todo:
            s = todo.pop()
            if s is True:
                continue
            if not isinstance(s, dict) or id(s) in seen or not set(s) <= _LITERAL_KEYS:
                return None
            seen.add(id(s))
            if isinstance(s.get("$ref"), str):
                try:
                    todo.append(self.res.resolve(s["$ref"], "#")[0])
                except UnsupportedSchemaError:
                    return None
            if isinstance(s.get("type"), (str, list)) and not set([s["type"]] if isinstance(s["type"], str)
                                                                  else s["type"]) <= {*ALL_TYPES, "integer"}:
                return None
            out.append(s)
        return out

    def valid_values(self, values, conj, p: str) -> list:
        """The members of ``values`` that every schema in ``conj`` accepts."""
        if not conj:
            return list(values)
        simple_conj = self._literal_only(conj)
        if simple_conj is None:
            budget = current()
            return [v for v in values if budget.tick(64) or self.valid(v, conj, p)]
        out = list(values)
        budget = current()
        for s in simple_conj:
            budget.check()  # only type/enum/const/annotations: no need for a validator
            ts = s.get("type")
            ts = [ts] if isinstance(ts, str) else ts
            keys = {vkey(v) for v in s["enum"]} if isinstance(s.get("enum"), list) else None
            out = [v for v in out if (ts is None or any(type_of(v, t) for t in ts))
                   and (keys is None or vkey(v) in keys) and ("const" not in s or vkey(v) == vkey(s["const"]))]
        return out

    def valid(self, value: Any, conj, p: str) -> bool:
        if not conj:
            return True
        if self._validator is None:
            cls = jsonschema.validators.validator_for(self.root if isinstance(self.root, dict) else {},
                                                      default=jsonschema.Draft202012Validator)
            self._validator = cls(self.root if isinstance(self.root, (dict, bool)) else {},
                                  format_checker=cls.FORMAT_CHECKER)
        try:
            return self._validator.evolve(schema={"allOf": [s for s, _ in conj]}).is_valid(value)
        except Exception as e:  # noqa: BLE001 -- an unresolvable $ref, a bad regex...
            raise UnsupportedSchemaError("enum", p, f"cannot check a literal value: {type(e).__name__}") from None



_LITERAL_KEYS = {"type", "enum", "const", "title", "description", "default", "examples", "$comment", "$id",
                 "$schema", "deprecated", "readOnly", "writeOnly", "nullable", "$ref", "definitions", "$defs",
                 "x-nullable", "example"}
