"""The core install is what the SDK, the engine and the compiler need: the server and the plots are extras, and
without them `import agentkit`, an Agent, `extract` and a tiny engine's generation still work, while the features
that need them fail with an error naming the extra."""

import subprocess
import sys
import textwrap
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
BLOCKED = ("fastapi", "uvicorn", "starlette", "prometheus_client", "matplotlib")


def _name(req: str) -> str:
    return req.split(";")[0].split("[")[0].split("=")[0].split(">")[0].split("<")[0].split("~")[0].strip().lower()


def test_core_dependencies_exclude_the_server_and_plots():
    core = {_name(r) for r in PROJECT["dependencies"]}
    assert not core & {"fastapi", "uvicorn", "prometheus-client", "matplotlib", "ray", "opentelemetry-api",
                       "llama-cpp-python"}, core
    extras = PROJECT["optional-dependencies"]
    assert {_name(r) for r in extras["server"]} == {"fastapi", "uvicorn", "prometheus-client"}
    assert {_name(r) for r in extras["evals"]} == {"matplotlib"}
    assert {_name(r) for r in extras["repair"]} == {"pytest", "coverage"}
    for name in ("llama", "ray", "otel", "peers"):
        assert extras[name], name


def test_dev_pulls_every_extra_the_tests_need():
    dev = PROJECT["optional-dependencies"]["dev"]
    self_ref = [r for r in dev if _name(r) == "agentkit"]
    assert len(self_ref) == 1
    pulled = set(self_ref[0].split("[", 1)[1].rstrip("]").split(","))
    assert pulled == {"server", "evals", "ray", "otel", "peers", "repair"}  # llama builds from source: not in dev


def test_extras_map_names_the_pyproject_extras():
    from agentkit._extras import EXTRAS

    extras = PROJECT["optional-dependencies"]
    for extra, modules in EXTRAS.items():
        dists = {_name(r).replace("-", "_") for r in extras[extra]}
        assert set(modules) == dists, extra


CORE_ONLY = textwrap.dedent('''
    import importlib.abc, sys
    BLOCKED = %r

    class Block(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in BLOCKED:
                raise ModuleNotFoundError(f"No module named {name!r} (blocked: core only)", name=name)
            return None

    sys.meta_path.insert(0, Block())
    import importlib.util
    importlib.util.find_spec = (lambda f: lambda name, *a: None if name.split(".")[0] in BLOCKED else f(name, *a))(
        importlib.util.find_spec)

    import torch
    torch.set_num_threads(1)
    from pydantic import BaseModel
    import agentkit
    from agentkit import Agent, DecodeConfig, extract
    from agentkit.errors import MissingExtraError
    from agentkit.sdk import FunctionModel
    from agentkit.engine import tiny_engine

    class City(BaseModel):
        name: str

    agent = Agent(FunctionModel(lambda m, i: {"name": "Paris"}), output_type=City)
    assert agent.run_sync("Where?").output == City(name="Paris")
    assert extract(City, "Paris is nice.", model=FunctionModel(lambda m, i: {"name": "Paris"})) == City(name="Paris")
    res = tiny_engine(0).generate("hello", DecodeConfig(max_new_tokens=4))
    assert res.stats.output_tokens >= 1
    for module, extra in (("agentkit.serving.app", "server"), ("agentkit.evals.plots", "evals")):
        try:
            __import__(module)
        except MissingExtraError as e:
            assert e.extra == extra and f"agentkit[{extra}]" in str(e), e
        else:
            raise AssertionError(module + " imported without its extra")
    from typer.testing import CliRunner
    from agentkit.cli import app  # the README's first command is `agentkit demo` on the core install
    assert CliRunner().invoke(app, ["demo", "--help"]).exit_code == 0
    r = CliRunner().invoke(app, ["serve"])
    assert r.exit_code == 2 and "agentkit[server]" in r.output, r.output
    loaded = sorted(m for m in sys.modules if m.split(".")[0] in BLOCKED)
    assert not loaded, loaded
    print("CORE-OK")
''') % (BLOCKED,)


def test_core_only_agent_extract_and_engine_work():
    r = subprocess.run([sys.executable, "-c", CORE_ONLY], check=False, capture_output=True, text=True, timeout=300,
                       env={"OMP_NUM_THREADS": "1", "PATH": "/usr/bin:/bin", "HOME": str(Path.home())}, cwd=ROOT)
    assert r.returncode == 0 and "CORE-OK" in r.stdout, r.stderr[-3000:]


def test_cli_serve_names_the_server_extra(monkeypatch):
    from typer.testing import CliRunner

    from agentkit import _extras
    from agentkit.cli import app

    for m in [m for m in sys.modules if m == "agentkit.serving" or m.startswith("agentkit.serving.")]:
        monkeypatch.delitem(sys.modules, m)
    monkeypatch.setattr(_extras, "missing", lambda extra: ["fastapi"] if extra == "server" else [])
    r = CliRunner().invoke(app, ["serve"])
    assert r.exit_code == 2 and "agentkit[server]" in r.output, r.output


def test_the_repair_loop_names_its_extra(monkeypatch, tmp_path):
    """Without pytest and coverage the repair loop stops before it touches the repository (CI once ran it without
    coverage installed: a bare ModuleNotFoundError deep in the localiser)."""
    from agentkit import _extras
    from agentkit.errors import MissingExtraError
    from agentkit.repair import OperatorDrafter, repair

    monkeypatch.setattr(_extras, "missing", lambda extra: ["coverage"] if extra == "repair" else [])
    with pytest.raises(MissingExtraError, match=r"agentkit\[repair\]"):
        repair(tmp_path, OperatorDrafter())


@pytest.mark.parametrize("extra", ["server", "evals", "repair"])
def test_require_names_the_extra(monkeypatch, extra):
    from agentkit import _extras
    from agentkit.errors import MissingExtraError, UserError

    monkeypatch.setattr(_extras, "missing", lambda e: ["x"])
    with pytest.raises(MissingExtraError, match=rf"pip install 'agentkit\[{extra}\]'") as e:
        _extras.require(extra, "a feature")
    assert isinstance(e.value, ImportError) and isinstance(e.value, UserError) and e.value.extra == extra
