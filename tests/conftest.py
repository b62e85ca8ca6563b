import contextlib
import os
import socket
import threading
import time
import warnings
from pathlib import Path

import pytest

warnings.filterwarnings("ignore", category=FutureWarning)

REPO = Path(__file__).resolve().parents[1]
# the shared benchmark data: ../shared/data next to the checkout (as CI has it), or where AGENTKIT_SHARED_DATA says
SHARED_DATA = Path(os.environ.get("AGENTKIT_SHARED_DATA") or REPO.parent / "shared" / "data")


@pytest.fixture(scope="session")
def shared_data() -> Path:
    if not SHARED_DATA.is_dir():
        pytest.skip(f"shared benchmark data not found at {SHARED_DATA}")
    return SHARED_DATA


@pytest.fixture(scope="module")
def one_thread():
    """One torch thread (use with ``pytestmark = pytest.mark.usefixtures("one_thread")``): on a shared, loaded
    2-core machine two threads make a tiny model several times slower."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="session")
def tiny():
    from agentkit.engine.engine import Engine
    from agentkit.models.tiny import tiny_llama

    return Engine.from_loaded(tiny_llama(1))


@pytest.fixture(scope="session")
def default_engine():
    """The embedded default model (SmolLM2-135M) on torch in float32 (its tests compare against transformers'
    own generate and share its weights; llama.cpp and bf16 have tests/engine/test_backbone_llama.py and
    test_dtype.py); built into the user cache on first use (~25 s)."""
    from agentkit.config import EngineConfig
    from agentkit.engine.engine import Engine

    return Engine(EngineConfig(backend="torch", dtype="float32"))


@contextlib.contextmanager
def _on_loopback(app, log_level: str = "warning"):
    """Serve ``app`` with uvicorn on an ephemeral 127.0.0.1 port in a thread; yields ``http://127.0.0.1:PORT``."""
    import uvicorn

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    srv = uvicorn.Server(uvicorn.Config(app, log_level=log_level, lifespan="on"))
    th = threading.Thread(target=srv.run, kwargs={"sockets": [sock]}, daemon=True)
    th.start()
    deadline = time.monotonic() + 10
    while not srv.started:
        assert time.monotonic() < deadline, "uvicorn did not start within 10 s"
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    finally:
        srv.should_exit = True
        th.join(5)
        sock.close()


@pytest.fixture(scope="session")
def on_loopback():
    """``with on_loopback(app) as url:`` -- a real HTTP server for clients that need one (openai, pydantic-ai)."""
    return _on_loopback


def _grouped_logits(bb, prompt: list[int], rest: list[int], groups: list[int]):
    """Logits at every position of ``rest``, encoded after ``prompt`` in passes of ``groups`` tokens each."""
    import torch

    cache = bb.new_cache(room=len(rest))
    bb.encode(prompt, cache)
    out, i = [], 0
    for g in groups:
        out.append(bb.encode(rest[i:i + g], cache, rows=list(range(g))))
        i += g
    assert cache.get_seq_length() == len(prompt) + len(rest)
    return torch.cat(out)


@pytest.fixture(scope="session")
def grouped_logits():
    """``grouped_logits(backbone, prompt, rest, groups)``: ``rest``'s logits, encoded in passes of ``groups``."""
    return _grouped_logits
