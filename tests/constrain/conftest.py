import pytest

from agentkit.constrain.vocab import token_vocab
from agentkit.models.tiny import tiny_tokenizer


@pytest.fixture(scope="module")
def vocab():
    """The tiny tokenizer and its token vocabulary (the constrain tests' token automata run over it)."""
    tok = tiny_tokenizer()
    return tok, token_vocab(tok)
