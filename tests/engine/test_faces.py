"""The engine's faces (``agentkit/engine/faces.py``): the Engine has every one; a double only what it defines."""

from agentkit.engine.faces import BackboneLike, Constraining, Generating, Scoring, Tokenizing

FACES = (Generating, Tokenizing, Constraining, Scoring)


def test_the_engine_has_every_face(tiny):
    assert all(isinstance(tiny, f) for f in FACES)


def test_a_double_with_generate_only_is_generating_only():
    class Double:
        def generate(self, messages, config, **kw):
            return None

    assert [isinstance(Double(), f) for f in FACES] == [True, False, False, False]


def test_every_backbone_class_is_backbone_like(tiny):
    """The passes the scoring uses (new_cache, encode, crop), on the torch, DiffusionGemma and
    llama.cpp backbones (classes: llama.cpp itself need not be installed), and on the engine's instance."""
    from agentkit.engine.backbone import Backbone
    from agentkit.engine.gemma import GemmaBackbone
    from agentkit.engine.llama_cpp import LlamaBackbone

    assert isinstance(tiny.backbone, BackboneLike)
    for cls in (Backbone, GemmaBackbone, LlamaBackbone):
        assert issubclass(cls, BackboneLike), cls

    class NoCrop:
        def new_cache(self):
            return None

        def encode(self, ids, cache, rows=(-1,)):
            return None

    assert not isinstance(NoCrop(), BackboneLike)
