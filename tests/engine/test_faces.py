"""The engine's faces (``agentkit/engine/faces.py``): the Engine has every one; a double only what it defines."""

import ast
import functools
import importlib.util
import inspect
import sys
from pathlib import Path

import pytest
import torch

from agentkit.engine import faces
from agentkit.engine.faces import (
    BackboneLike,
    Batching,
    Constraining,
    DecoderHooks,
    EngineLike,
    HiddenPasses,
    Scoring,
    Tokenizing,
)

FACES = (EngineLike, Tokenizing, Constraining, Scoring)


def test_the_engine_has_every_face(tiny):
    assert all(isinstance(tiny, f) for f in FACES)


def test_a_double_with_generate_only_is_engine_like_only():
    class Double:
        batches = False

        def generate(self, messages, config, **kw):
            return None

    assert [isinstance(Double(), f) for f in FACES] == [True, False, False, False]


# -- BackboneLike: every backbone, the test fakes included ---------------------------------------------------------
def members(face) -> dict[str, object]:
    """The members a Protocol of faces.py declares (its own and its faces.py bases'): name -> the declared
    function, or None for a data member."""
    out: dict[str, object] = {}
    for k in reversed(face.__mro__):
        if k.__module__ == faces.__name__:
            out |= dict.fromkeys(getattr(k, "__annotations__", {}))
            out |= {n: v for n, v in vars(k).items() if callable(v) and not n.startswith("_")}
    return out


def mismatch(impl, declared) -> str | None:
    """Why ``impl`` (a bound method or function) cannot be called as the face declares ``declared``: its
    positional parameters in the face's order and names, a default where the face has one, nothing more required.
    A proxy taking ``*args, **kwargs`` takes anything."""
    want = list(inspect.signature(declared).parameters.values())[1:]  # after self
    have = list(inspect.signature(impl).parameters.values())
    kinds = {p.kind for p in have}
    if {inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD} <= kinds:
        return None
    positional = [p for p in have if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    for i, w in enumerate(want):
        if i >= len(positional) or positional[i].name != w.name:
            return f"parameter {i + 1} is not {w.name!r}"
        if w.default is not w.empty and positional[i].default is w.empty:
            return f"{w.name!r} has no default"
    extra = [p.name for p in have[len(want):] if p.default is p.empty and p.kind not in (p.VAR_POSITIONAL,
                                                                                          p.VAR_KEYWORD)]
    return f"requires {extra}" if extra else None


def lacks(obj, face) -> list[str]:
    """What ``obj`` lacks of ``face``: a member, or a method it cannot be called with as the face declares."""
    out = []
    for name, declared in members(face).items():
        if not hasattr(obj, name):
            out.append(f"no {name}")
        elif declared is not None and (why := mismatch(getattr(obj, name), declared)):
            out.append(f"{name}: {why}")
    return out


def fake_llama_cpp(monkeypatch):
    """A stand-in ``llama_cpp`` module: every call answers a mock, so that a :class:`LlamaBackbone` can be built
    (and its members read) where llama-cpp-python is not installed; its passes are not run."""
    from unittest import mock

    monkeypatch.setitem(sys.modules, "llama_cpp", mock.MagicMock())


def _test_double(path: str, name: str):
    spec = importlib.util.spec_from_file_location(f"_double_{Path(path).stem}", TESTS / path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return getattr(module, name)


def build(kind: str, monkeypatch, batcher):
    """One backbone of each kind, on the tiny random models."""
    from agentkit.engine.backbone import Backbone
    from agentkit.engine.fixed import FixedShapeBackbone
    from agentkit.engine.gemma import GemmaBackbone
    from agentkit.engine.llama_cpp import LlamaBackbone
    from agentkit.engine.selfspec import SplitBackbone, SyncBackbone
    from agentkit.models.tiny import tiny_diffusion_gemma, tiny_llama

    lm = tiny_llama(0)
    if kind == "llama.cpp":
        fake_llama_cpp(monkeypatch)
        return LlamaBackbone(lm, Path("model.gguf"))
    return {
        "torch": lambda: Backbone(lm),
        "fixed": lambda: FixedShapeBackbone(lm, 4),
        "gemma": lambda: GemmaBackbone(tiny_diffusion_gemma(0)),
        "split": lambda: SplitBackbone(Backbone(lm), Backbone(tiny_llama(1))),
        "sync": lambda: SyncBackbone(Backbone(lm)),
        "sync-split": lambda: SyncBackbone(SplitBackbone(Backbone(lm), Backbone(tiny_llama(1)))),
        "batched": lambda: batcher.slot().wrap(Backbone(lm)),
        "counting (test fake)": lambda: _test_double("engine/test_backbone_sizing.py", "Counting")(Backbone(lm)),
    }[kind]()


# kind -> the faces it has beyond BackboneLike
KINDS = {"torch": {Batching, HiddenPasses}, "fixed": {Batching, HiddenPasses}, "gemma": set(),
         "llama.cpp": {Batching}, "split": set(), "sync": set(), "sync-split": set(),
         "batched": {Batching, HiddenPasses}, "counting (test fake)": {Batching, HiddenPasses}}
BACKBONES = ["torch", "fixed", "gemma", "llama.cpp", "split", "sync", "sync-split", "batched", "counting (test fake)"]


# kind -> its class
CLASSES = {"torch": "Backbone", "fixed": "FixedShapeBackbone", "gemma": "GemmaBackbone", "llama.cpp": "LlamaBackbone",
           "split": "SplitBackbone", "sync": "SyncBackbone", "sync-split": "SyncBackbone", "batched": "BatchedBackbone"}


def test_every_backbone_class_of_the_package_is_checked():
    """A class of agentkit/ that defines ``encode`` or ``denoise`` is a backbone: it is one of BACKBONES."""
    import ast

    found = set()
    for path in sorted((TESTS.parent / "agentkit").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.ClassDef) or "Protocol" in {getattr(b, "id", "") for b in node.bases}:
                continue
            if {"encode", "denoise"} & {f.name for f in node.body if isinstance(f, ast.FunctionDef)}:
                found.add(node.name)
    assert found == set(CLASSES.values())
    assert set(CLASSES) <= set(BACKBONES) and set(KINDS) == set(BACKBONES)


# the backbone fakes of the tests: kind in BACKBONES (built and checked below), or None for the example of a class
# that is not a backbone (refused below)
TEST_BACKBONES = {"engine/test_backbone_sizing.py:Counting": "counting (test fake)", "engine/test_faces.py:NoCrop": None}


def test_every_backbone_fake_of_the_tests_is_checked():
    """A class of tests/ that defines ``encode`` or ``denoise``, at module level or inside a test function, is in
    TEST_BACKBONES."""
    found = set()
    for path in sorted(TESTS.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef) and {"encode", "denoise"} & {
                    f.name for f in node.body if isinstance(f, ast.FunctionDef)}:
                found.add(f"{path.relative_to(TESTS).as_posix()}:{node.name}")
    assert found == set(TEST_BACKBONES)
    assert {kind for kind in TEST_BACKBONES.values() if kind} <= set(BACKBONES)


@pytest.fixture(scope="module")
def batcher():
    from agentkit.engine.batch import Batcher

    b = Batcher(max_batch=4)
    yield b
    b.close()


@pytest.mark.parametrize("kind", BACKBONES)
def test_every_backbone_has_the_backbone_face(kind, monkeypatch, batcher):
    bb = build(kind, monkeypatch, batcher)
    assert lacks(bb, BackboneLike) == [] and isinstance(bb, BackboneLike)
    for face in (Batching, HiddenPasses):
        assert (lacks(bb, face) == []) == (face in KINDS[kind]), (face.__name__, lacks(bb, face))
    assert isinstance(bb.shift, bool) and bb.cost_curve and all(
        isinstance(n, int) and isinstance(ms, float) for n, ms in bb.cost_curve.items())


@pytest.mark.parametrize("kind", [k for k in BACKBONES if k != "llama.cpp"])  # its own file runs llama.cpp's
def test_every_backbone_keeps_the_cache_contract(kind, monkeypatch, batcher):
    """``encode`` appends to the cache, ``denoise`` leaves it as it was, ``crop`` rewinds it, and a position's
    logits do not depend on the pass that computed it (within float32 rounding)."""
    bb = build(kind, monkeypatch, batcher)
    ids = [5, 6, 7, 8, 9, 10]
    cache = bb.new_cache(room=16)
    full = bb.encode(ids, cache, rows=[-1, 0, 4])
    assert full.shape[0] == 3 and cache.get_seq_length() == 6
    canvas = bb.denoise([11, 12, 13], cache, [0, 2], not bb.shift)  # a no-shift head is a diffusion decoder's
    assert canvas.shape == (2, full.shape[1]) and cache.get_seq_length() == 6
    bb.crop(cache, 4)
    assert cache.get_seq_length() == 4
    again = bb.encode(ids[4:], cache, rows=[0])
    assert cache.get_seq_length() == 6
    torch.testing.assert_close(again[0], full[2], atol=1e-4, rtol=1e-4)
    assert isinstance(bb.batchable(), bool) and isinstance(bb.batchable(cache), bool)


def test_a_sync_backbone_runs_its_pending_tokens_first():
    from agentkit.engine.backbone import Backbone
    from agentkit.engine.selfspec import SyncBackbone
    from agentkit.models.tiny import tiny_llama

    bb = Backbone(tiny_llama(0))
    sync, ref = SyncBackbone(bb), bb.new_cache()
    want = bb.encode([5, 6, 7, 8], ref, rows=[2, 3])
    cache = bb.new_cache()
    sync.pending = [5, 6]
    torch.testing.assert_close(sync.encode([7, 8], cache, rows=[0, -1]), want, atol=1e-4, rtol=1e-4)
    assert sync.pending == [] and cache.get_seq_length() == 4


def test_a_backbone_without_crop_or_with_other_parameters_is_not_one():
    class NoCrop:
        shift, cost_curve = True, {1: 1.0}

        def new_cache(self, room=0):
            return None

        def encode(self, ids, cache, rows=(-1,)):
            return None

        def denoise(self, ids, cache, rows, bidirectional):
            return None

        def batchable(self, cache=None):
            return False

    class Renamed(NoCrop):
        def crop(self, cache, n):
            pass

    class Checked(Renamed):
        def crop(self, cache, length):
            pass

    assert lacks(NoCrop(), BackboneLike) == ["no crop"] and not isinstance(NoCrop(), BackboneLike)
    assert lacks(Renamed(), BackboneLike) == ["crop: parameter 2 is not 'length'"]
    assert lacks(Checked(), BackboneLike) == []


def test_the_decoder_has_its_hooks():
    """The extension points the loops outside the decoder use (DiffusionGemma's canvas, the drafter, the engine)."""
    from agentkit.config import DecodeConfig
    from agentkit.engine.backbone import Backbone
    from agentkit.engine.decode import Decoder
    from agentkit.models.tiny import tiny_llama

    lm = tiny_llama(0)
    dec = Decoder(Backbone(lm), DecodeConfig(mode="ar", max_new_tokens=4), None, lm.eos_ids)
    assert lacks(dec, DecoderHooks) == [] and isinstance(dec, DecoderHooks)
    assert dec.forced_tokens(None) == [] and dec.allowed_tokens(None) is None and not dec.is_complete(None)


# EngineLike is what the server and the SDK call: the engine and every engine double of the tests take all of
# generate's keywords (a double may ignore one, through **kw) and say whether they batch. An engine double is any
# class of tests/ with a synchronous ``generate`` (an SDK Generator's is async), at module level or inside a test
# function, found by reading the sources (ast); NOT_ENGINES names the other classes with one, and why.
TESTS = Path(__file__).resolve().parents[1]
KEYWORDS = {n for n, p in inspect.signature(EngineLike.generate).parameters.items() if p.kind is p.KEYWORD_ONLY}
NOT_ENGINES = {
    "engine/test_faces.py:Partial": "the double without the keywords that EngineGenerator refuses (below)",
    "evals/test_extract.py:EchoPeer": "an extraction peer (generate(messages, schema, max_new_tokens)), not an engine",
}


def takes_every_keyword(fn) -> bool:
    params = inspect.signature(fn).parameters.values()
    named = {p.name for p in params if p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD)}
    return KEYWORDS <= named or any(p.kind is p.VAR_KEYWORD for p in params)


@functools.lru_cache(maxsize=4)
def engine_doubles(root: Path = TESTS) -> dict[str, tuple[ast.ClassDef, dict[str, ast.ClassDef], bool]]:
    """``"path:Class"`` -> (its class node, the file's classes by name, whether it is at module level), for every
    class under ``root`` that defines a synchronous ``generate``."""
    out = {}
    for path in sorted(root.rglob("*.py")):
        tree = ast.parse(path.read_text())
        classes = {n.name: n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)}
        for node in classes.values():
            if any(isinstance(f, ast.FunctionDef) and f.name == "generate" for f in node.body):
                out[f"{path.relative_to(root).as_posix()}:{node.name}"] = (node, classes, node in tree.body)
    return out


def _sets_batches(cls: ast.ClassDef, classes: dict[str, ast.ClassDef]) -> bool:
    """``batches`` set in the class body or on ``self``, a ``batches`` property, a ``__getattr__`` that hands
    everything to a real engine, or any of that in a base class of the same file."""
    for node in ast.walk(cls):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(
            node, ast.AnnAssign) else []
        names = [e for t in targets for e in (t.elts if isinstance(t, ast.Tuple) else [t])]
        if any(getattr(e, "id", None) == "batches" or getattr(e, "attr", None) == "batches" for e in names):
            return True
        if isinstance(node, ast.FunctionDef) and node.name in ("batches", "__getattr__"):
            return True
    return any(_sets_batches(classes[b.id], classes) for b in cls.bases if isinstance(b, ast.Name) and b.id in classes)


def lacks_engine_face(cls: ast.ClassDef, classes: dict[str, ast.ClassDef]) -> list[str]:
    """What an engine double's source lacks of EngineLike: the keywords its generate does not take, ``batches``."""
    gen = next(f for f in cls.body if isinstance(f, ast.FunctionDef) and f.name == "generate")
    named = {a.arg for a in gen.args.args + gen.args.kwonlyargs}
    out = [] if gen.args.kwarg is not None else [f"generate takes no {k}" for k in sorted(KEYWORDS - named)]
    return out if _sets_batches(cls, classes) else [*out, "no batches"]


DOUBLES = sorted(set(engine_doubles()) - set(NOT_ENGINES))


@pytest.mark.parametrize("where", DOUBLES)
def test_every_engine_double_is_engine_like(where):
    node, classes, _ = engine_doubles()[where]
    assert lacks_engine_face(node, classes) == [], where


@pytest.mark.parametrize("where", [d for d in DOUBLES if engine_doubles()[d][2]])
def test_every_module_level_engine_double_is_engine_like_when_imported(where):
    path, name = where.split(":")
    spec = importlib.util.spec_from_file_location(f"_double_{Path(path).stem}", TESTS / path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    cls = getattr(module, name)
    assert takes_every_keyword(cls.generate), f"{where}.generate does not take {sorted(KEYWORDS)}"
    assert isinstance(getattr(cls, "batches", None), bool) or "__getattr__" in vars(cls), f"{where}: no batches"


def test_the_scan_finds_the_doubles_inside_test_functions_and_flags_a_bad_one(tmp_path):
    found = engine_doubles()
    assert set(NOT_ENGINES) <= set(found)  # no stale exemption
    assert {"sdk/test_agent.py:FakeEngine", "serving/test_hardening.py:Stuck"} <= set(DOUBLES)
    assert not any(found[d][2] for d in ("sdk/test_agent.py:FakeEngine", "serving/test_hardening.py:Stuck"))
    (tmp_path / "test_x.py").write_text(
        "def test_x():\n"
        "    class Good:\n        batches = False\n        def generate(self, prompt, config=None, **kw): ...\n"
        "    class Late(Good):\n        def generate(self, prompt, config=None, *, template=None): ...\n"
        "    class Bare:\n        def generate(self, prompt, config=None, **kw): ...\n")
    got = {k.split(":")[1]: lacks_engine_face(n, c) for k, (n, c, _) in engine_doubles(tmp_path).items()}
    assert got["Good"] == [] and got["Bare"] == ["no batches"]
    assert got["Late"] == [f"generate takes no {k}" for k in sorted(KEYWORDS - {"template"})]


def test_something_without_the_keywords_is_refused():
    from agentkit.errors import UserError
    from agentkit.sdk import EngineGenerator

    class Partial:
        def generate(self, prompt, config=None):
            return None

    assert not isinstance(Partial(), EngineLike)
    with pytest.raises(UserError, match="EngineLike"):
        EngineGenerator(Partial())
