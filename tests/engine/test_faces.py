"""The engine's faces (``agentkit/engine/faces.py``): the Engine has every one; a double only what it defines."""

from agentkit.engine.faces import Constraining, Generating, Scoring, Tokenizing

FACES = (Generating, Tokenizing, Constraining, Scoring)


def test_the_engine_has_every_face(tiny):
    assert all(isinstance(tiny, f) for f in FACES)


def test_a_double_with_generate_only_is_generating_only():
    class Double:
        def generate(self, messages, config, **kw):
            return None

    assert [isinstance(Double(), f) for f in FACES] == [True, False, False, False]
