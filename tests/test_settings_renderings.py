"""Every place in ``agentkit`` and ``serving`` that declares decoding or engine settings is a known rendering of
their table, and agrees with it on types, defaults and ranges.

The tables: decoding settings in ``agentkit/settings.py`` (``SETTINGS``), engine settings in ``EngineConfig``'s
fields (``agentkit/config.py``). A class or function that declares three or more of their names (fields, or
parameters with defaults) is found by reading the source; it must be listed in :data:`RENDERINGS` (then each setting
it declares is checked: the table's type, the table's default or one of its own listed with the place, the table's
range in a request model) or in :data:`NOT_RENDERINGS` with the reason its names mean something else there.
"""

from __future__ import annotations

import ast
import dataclasses
import importlib
import inspect
import sys
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from agentkit import settings as table
from agentkit.config import EngineConfig

ROOT = Path(__file__).resolve().parents[1]
SOURCES = {"agentkit": "agentkit", "serving": "agentkit.serving"}  # folder -> the package it installs as
SERVER = {**table.server_fields("body"), **table.server_fields("agentkit")}
DECODE_NAMES = {s.name for s in table.SETTINGS} | set(table.sdk_names()) | set(SERVER)
ENGINE = {f.name: f for f in dataclasses.fields(EngineConfig)}
ENGINE_TYPES = typing.get_type_hints(EngineConfig)
MIN_NAMES = 3  # a declaration holding this many setting names is a rendering of the tables


@dataclass(frozen=True)
class Rendering:
    """A place that restates settings. ``decode``: its names are the table's (``"sdk"``: ModelSettings keys,
    ``"server"``: request fields, ``"name"``: setting names); ``engine``: EngineConfig's fields are checked too;
    ``none``: None stands for the table's default (a request field left out, an option not given); ``own``: defaults
    it sets apart from the table's; ``aliases``: its name -> the setting's."""

    decode: str | None = "name"
    engine: bool = False
    none: bool = False
    own: dict[str, Any] = field(default_factory=dict)
    aliases: dict[str, str] = field(default_factory=dict)


EVAL_OWN = {"seed": 0, "max_new_tokens": 512}  # evals are seeded; a constrained eval's budget
RENDERINGS: dict[str, Rendering] = {
    "agentkit/config.py:DecodeConfig": Rendering(),
    "agentkit/config.py:EngineConfig": Rendering(decode=None, engine=True),
    "agentkit/sdk/_settings.py:ModelSettings": Rendering(decode="sdk"),
    "serving/protocol.py:AgentkitExt": Rendering(decode="server", none=True),
    "serving/protocol.py:Sampling": Rendering(decode="server", none=True),
    "serving/protocol.py:ChatRequest": Rendering(decode="server", none=True,
                                                 aliases={"max_completion_tokens": "max_new_tokens"}),
    "serving/completions.py:CompletionRequest": Rendering(decode="server", none=True,
                                                          own={"max_new_tokens": 16}),  # OpenAI's completions
    "serving/responses.py:ResponsesRequest": Rendering(decode="server", none=True,
                                                       aliases={"max_output_tokens": "max_new_tokens"}),
    "agentkit/evals/runner.py:EvalContext": Rendering(own=EVAL_OWN),
    "agentkit/evals/runner.py:RunSettings": Rendering(own=EVAL_OWN),
    "agentkit/evals/runner.py:run_eval": Rendering(engine=True, own=EVAL_OWN, aliases={"adapter": "adapter_path"}),
    "agentkit/evals/runner.py:build_engine": Rendering(decode=None, engine=True, aliases={"adapter": "adapter_path"}),
    "agentkit/evals/runner.py:_command": Rendering(decode=None, engine=True, aliases={"adapter": "adapter_path"}),
    "agentkit/evals/distributed.py:RayEvalConfig": Rendering(decode=None, engine=True, own={"threads": 1},
                                                             aliases={"adapter": "adapter_path"}),
    "agentkit/evals/agent_peers.py:serve": Rendering(decode=None, engine=True, own={"threads": 1}),
    "agentkit/evals/agent_loop.py:run_agent_loop": Rendering(decode=None, engine=True),
    "agentkit/engine/__init__.py:default_engine": Rendering(decode=None, engine=True),
    "agentkit/engine/sampler.py:pick": Rendering(),
    "serving/ray_serve.py:RayServeConfig": Rendering(decode=None, engine=True),
    "agentkit/cli.py:generate": Rendering(engine=True, none=True, own={"max_new_tokens": 128}),
    "agentkit/cli.py:eval_": Rendering(decode=None, engine=True, aliases={"adapter": "adapter_path"}),
    "agentkit/cli.py:serve": Rendering(decode=None, engine=True),
    "agentkit/cli.py:calibrate": Rendering(decode=None, engine=True),
    "agentkit/cli.py:demo": Rendering(engine=True, none=True),  # mode None: the calibrated one
    "agentkit/cli.py:_engine": Rendering(decode=None, engine=True),
}
NOT_RENDERINGS = {
    # the repair drafter's own sampling: mode is its draft mode (DRAFT_MODES), temperature and top_p its sampling
    "agentkit/repair/draft.py:ModelDrafter.__init__",
}


def _declarations() -> dict[str, set[str]]:
    """``"path:qualname"`` -> the setting names it declares, for every class (annotated fields) and function
    (parameters with defaults) of the sources."""
    names = DECODE_NAMES | set(ENGINE)
    out: dict[str, set[str]] = {}

    def visit(node: ast.AST, where: str, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.ClassDef):
                got = {s.target.id for s in child.body if isinstance(s, ast.AnnAssign)
                       and isinstance(s.target, ast.Name)}
                out[f"{where}:{prefix}{child.name}"] = got & names
                visit(child, where, f"{prefix}{child.name}.")
            elif isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                a = child.args
                pos = a.posonlyargs + a.args
                got = {x.arg for x in pos[len(pos) - len(a.defaults):]}
                got |= {x.arg for x, d in zip(a.kwonlyargs, a.kw_defaults, strict=True) if d is not None}
                out[f"{where}:{prefix}{child.name}"] = got & names
                visit(child, where, f"{prefix}{child.name}.")

    for folder in SOURCES:
        for path in sorted((ROOT / folder).rglob("*.py")):
            visit(ast.parse(path.read_text()), str(path.relative_to(ROOT)), "")
    return {k: v for k, v in out.items() if v}


def test_every_declaration_of_settings_is_a_known_rendering():
    found = {k for k, v in _declarations().items() if len(v) >= MIN_NAMES}
    unknown = sorted(found - set(RENDERINGS) - NOT_RENDERINGS)
    assert not unknown, (f"{unknown} declare decoding or engine settings: derive them from agentkit/settings.py or "
                         f"EngineConfig, or list them in RENDERINGS here so they are checked")
    for key in sorted(set(RENDERINGS) | NOT_RENDERINGS):
        _resolve(key)  # listed places exist (an AttributeError names one renamed or moved)


def test_a_new_restatement_would_be_found(tmp_path, monkeypatch):
    """The scan sees a dataclass that restates three settings (the check above cannot pass vacuously)."""
    src = tmp_path / "agentkit"
    src.mkdir()
    (src / "extra.py").write_text("class Copy:\n    copy_bias: float = 2.0\n    greedy: str = 'byte'\n"
                                  "    dtype: str = 'auto'\n")
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    assert _declarations() == {"agentkit/extra.py:Copy": {"copy_bias", "greedy", "dtype"}}


def _resolve(key: str) -> Any:
    path, qualname = key.split(":")
    folder, _, rest = path.partition("/")
    module = SOURCES[folder] + "." + rest.removesuffix(".py").removesuffix("/__init__").replace("/", ".")
    obj: Any = importlib.import_module(module.removesuffix(".__init__"))
    for part in qualname.split("."):
        obj = getattr(obj, part)
    return obj


NO_DEFAULT = object()


def _declared(obj: Any) -> dict[str, tuple[Any, Any, tuple]]:
    """name -> (type, default or NO_DEFAULT, pydantic metadata) of a dataclass, TypedDict, pydantic model or
    function (a typer option's default is the option's)."""
    if hasattr(obj, "model_fields"):
        return {k: (f.annotation, NO_DEFAULT if f.is_required() else f.default, tuple(f.metadata))
                for k, f in obj.model_fields.items()}
    if dataclasses.is_dataclass(obj):
        hints = typing.get_type_hints(obj)
        return {f.name: (hints[f.name], f.default_factory() if f.default_factory is not dataclasses.MISSING
                         else f.default, ()) for f in dataclasses.fields(obj)}
    if isinstance(obj, type):  # a TypedDict
        return {k: (t, NO_DEFAULT, ()) for k, t in typing.get_type_hints(obj).items()}
    out = {}
    for k, p in inspect.signature(obj).parameters.items():
        if p.default is inspect.Parameter.empty:
            continue
        kind = p.annotation
        if isinstance(kind, str):
            kind = eval(kind, vars(importlib.import_module(obj.__module__)))  # a string annotation
        out[k] = (kind, getattr(p.default, "default", p.default), ())
    return out


def _plain(kind: Any) -> Any:
    """``Annotated[int, ...]`` -> int; a path is a string; ``dict[str, Annotated[float, ...]]`` -> dict[str, float]."""
    if typing.get_origin(kind) is typing.Annotated:
        return _plain(typing.get_args(kind)[0])
    if kind is Path:
        return str
    if typing.get_origin(kind) in (dict, list):
        return typing.get_origin(kind)[tuple(_plain(a) for a in typing.get_args(kind))]
    return kind


def _args(kind: Any) -> set[Any]:
    """A type's alternatives without None (``int | None`` -> {int})."""
    args = typing.get_args(kind) if typing.get_origin(kind) in (typing.Union, types.UnionType) else (kind,)
    return {_plain(a) for a in args if a is not type(None)}


def _type_fits(s: table.Setting, kind: Any) -> bool:
    """The rendering's type says what the table's kind says (a server may take a stop string alone)."""
    args = _args(kind)
    if s.kind in ("int", "float", "bool"):
        return args == {{"int": int, "float": float, "bool": bool}[s.kind]}
    if s.kind == "text":
        return args == {str}
    if s.kind == "str":
        (one,) = args
        return one is str or (typing.get_origin(one) is typing.Literal and set(typing.get_args(one)) ==
                              set(s.choices))
    if s.kind == "list":
        return args in ({list[str]}, {str, list[str]})
    (bias,) = args
    keys, values = typing.get_args(bias)
    return typing.get_origin(bias) is dict and keys in (int, str) and values in (int, float)


def _names(r: Rendering) -> dict[str, str]:
    """The rendering's name -> the setting's."""
    own = {"sdk": table.sdk_names(), "server": SERVER, "name": {s.name: s.name for s in table.SETTINGS}}
    return {**own.get(r.decode or "", {}), **{k: v for k, v in r.aliases.items() if v in table.BY_NAME}}


def _bounds(metadata: tuple) -> dict[str, float]:
    import annotated_types as at

    return {attr: getattr(m, attr) for m in metadata for kind, attr in ((at.Ge, "ge"), (at.Gt, "gt"),
                                                                         (at.Le, "le"), (at.Lt, "lt"))
            if isinstance(m, kind)}


def _check_decode(key: str, r: Rendering, name: str, setting: str, kind: Any, default: Any, meta: tuple) -> None:
    s = table.BY_NAME[setting]
    assert kind is inspect.Parameter.empty or _type_fits(s, kind), f"{key} {name}: type {kind} is not the table's {s.kind} {s.choices or ''}"
    want = r.own.get(setting, s.default)
    assert default is NO_DEFAULT or default == want or (default is None and r.none), \
        f"{key} {name}: default {default!r}, the table's {want!r}"
    if meta or s.kind in ("int", "float") and r.decode == "server":
        assert _bounds(meta) == table.bounds(setting), f"{key} {name}: range {_bounds(meta)}, the table's " \
                                                       f"{table.bounds(setting)}"


def _check_engine(key: str, r: Rendering, name: str, setting: str, kind: Any, default: Any) -> None:
    want = _args(ENGINE_TYPES[setting])
    assert kind is inspect.Parameter.empty or _args(kind) == want, f"{key} {name}: type {kind}, EngineConfig.{setting}'s {ENGINE_TYPES[setting]}"
    expect = r.own.get(setting, ENGINE[setting].default)
    assert default == expect or (default is None and r.none), \
        f"{key} {name}: default {default!r}, EngineConfig.{setting}'s {expect!r}"


@pytest.mark.parametrize("key", sorted(RENDERINGS))
def test_each_rendering_has_the_tables_types_defaults_and_ranges(key):
    if key.startswith("serving/"):
        pytest.importorskip("fastapi")
    if key.startswith("serving/ray_serve"):
        pytest.importorskip("ray")
    r = RENDERINGS[key]
    names = _names(r)
    declared = _declared(_resolve(key))
    checked = 0
    for name, (kind, default, meta) in declared.items():
        if name in names:
            _check_decode(key, r, name, names[name], kind, default, meta)
            checked += 1
        elif r.engine and r.aliases.get(name, name) in ENGINE:
            _check_engine(key, r, name, r.aliases.get(name, name), kind, default)
            checked += 1
    assert checked >= 1, f"{key} declares none of the tables' settings"


def test_a_drifted_rendering_fails():
    """The checks above fail on a copy that disagrees with the table on a type, a default or a range."""
    from pydantic import BaseModel, Field

    class Drifted(BaseModel):
        copy_bias: float | None = Field(default=None, ge=0, le=50)

    meta = tuple(Drifted.model_fields["copy_bias"].metadata)
    server = Rendering(decode="server", none=True)
    with pytest.raises(AssertionError, match="range"):
        _check_decode("Drifted", server, "copy_bias", "copy_bias", float | None, None, meta)
    with pytest.raises(AssertionError, match="default"):
        _check_decode("Drifted", Rendering(), "canvas_length", "canvas_length", int, 64, ())
    with pytest.raises(AssertionError, match="type"):
        _check_decode("Drifted", Rendering(), "greedy", "greedy", typing.Literal["byte"], "byte", ())
    with pytest.raises(AssertionError, match="default"):
        _check_engine("Drifted", Rendering(decode=None, engine=True), "dtype", "dtype", str, "float32")
    with pytest.raises(AssertionError, match="type"):
        _check_engine("Drifted", Rendering(decode=None, engine=True), "threads", "threads", float, None)
