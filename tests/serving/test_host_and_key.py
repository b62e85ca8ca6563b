"""A loopback server answers only requests that name it as their Host (403 otherwise: no DNS rebinding from a web
page), and its API key can come from a file or the ``AGENTKIT_API_KEY`` environment variable instead of ``ps``."""

from __future__ import annotations

import httpx
import pytest
from agentkit.serving.app import create_app
from agentkit.serving.cli import read_api_key, with_host_default
from agentkit.serving.config import ServerConfig
from agentkit.serving.connections import host_allowed, host_name, loopback_hosts
from typer.testing import CliRunner

from agentkit.cli import app as cli_app
from agentkit.errors import InvalidRequestError


def test_loopback_hosts_and_matching():
    assert loopback_hosts("127.0.0.1") == ("localhost", "127.0.0.1", "::1")
    assert loopback_hosts("::1") == ("localhost", "127.0.0.1", "::1")
    assert loopback_hosts("127.0.0.2") == ("localhost", "127.0.0.1", "::1", "127.0.0.2")
    assert loopback_hosts("localhost") == ("localhost", "127.0.0.1", "::1")
    assert loopback_hosts("0.0.0.0") is None and loopback_hosts("10.1.2.3") is None
    assert loopback_hosts("myhost.example") is None
    assert [host_name(h) for h in ("LocalHost:8000", "[::1]:8000", "::1", "127.0.0.1")] == [
        "localhost", "::1", "::1", "127.0.0.1"]
    allowed = ("localhost", "127.0.0.1", "::1")
    for ok in ("localhost", "localhost:8000", "127.0.0.1:8000", "[::1]:8000"):
        assert host_allowed(ok, allowed), ok
    for bad in ("attacker.example", "localhost.attacker.example", "", "127.0.0.1.nip.io:8000"):
        assert not host_allowed(bad, allowed), bad
    assert host_allowed("api.example.com", ("*.example.com",)) and not host_allowed("example.org", ("*.example.com",))
    assert host_allowed("anything", ("*",))


def test_server_config_checks_hosts_and_key():
    assert ServerConfig(allowed_hosts=["LocalHost "]).allowed_hosts == ("localhost",)
    for bad in ("localhost", (), ("",)):
        with pytest.raises(InvalidRequestError, match="allowed_hosts"):
            ServerConfig(allowed_hosts=bad)
    with pytest.raises(InvalidRequestError, match="api_key"):
        ServerConfig(api_key=" ")


async def test_foreign_host_is_403_on_a_loopback_bind():
    from agentkit.engine import tiny_engine

    cfg = with_host_default(ServerConfig(api_key="k"), "127.0.0.1")
    assert cfg.allowed_hosts == ("localhost", "127.0.0.1", "::1")
    app = create_app(tiny_engine(0), cfg)
    key = {"Authorization": "Bearer k"}
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1:8000") as c:
        assert (await c.get("/v1/models", headers=key)).status_code == 200
        assert (await c.get("/v1/models", headers={**key, "Host": "localhost:8000"})).status_code == 200
        for path in ("/v1/models", "/health"):
            r = await c.get(path, headers={**key, "Host": "attacker.example"})
            assert r.status_code == 403, path
            assert r.json()["error"]["code"] == "host_not_allowed" and r.json()["error"]["param"] == "Host"
        # checked before the key: a rebinding page learns nothing from 401 / 200
        r = await c.post("/v1/chat/completions", json={"model": "agentkit", "messages": []}, headers={"Host": "attacker.example:8000"})
        assert r.status_code == 403
    app.state.scheduler.close()
    assert with_host_default(ServerConfig(), "0.0.0.0").allowed_hosts is None  # names not known: any host


def test_read_api_key(tmp_path, monkeypatch):
    monkeypatch.delenv("AGENTKIT_API_KEY", raising=False)
    assert read_api_key(None, None) is None
    monkeypatch.setenv("AGENTKIT_API_KEY", "from-env")
    assert read_api_key(None, None) == "from-env"
    assert read_api_key("from-flag", None) == "from-flag"
    f = tmp_path / "key"
    f.write_text("from-file\n")
    assert read_api_key(None, f) == "from-file"
    with pytest.raises(InvalidRequestError, match="not both"):
        read_api_key("x", f)
    f.write_text("\n")
    with pytest.raises(InvalidRequestError, match="one line"):
        read_api_key(None, f)
    with pytest.raises(InvalidRequestError, match="cannot read"):
        read_api_key(None, tmp_path / "missing")


def test_serve_takes_key_from_env_and_file_and_hosts(tmp_path, monkeypatch):
    runner, seen = CliRunner(), {}
    monkeypatch.setattr("agentkit.serving.cli.run", lambda e, s, **kw: seen.update(server=s))
    monkeypatch.setenv("AGENTKIT_API_KEY", "env-key")
    r = runner.invoke(cli_app, ["serve", "--port", "8125"])
    assert r.exit_code == 0, r.output
    assert seen["server"].api_key == "env-key"
    assert seen["server"].allowed_hosts == ("localhost", "127.0.0.1", "::1")
    f = tmp_path / "key"
    f.write_text("file-key\n")
    monkeypatch.delenv("AGENTKIT_API_KEY")
    r = runner.invoke(cli_app, ["serve", "--port", "8125", "--api-key-file", str(f), "--allowed-hosts",
                                "box.lan, localhost"])
    assert r.exit_code == 0, r.output
    assert seen["server"].api_key == "file-key" and seen["server"].allowed_hosts == ("box.lan", "localhost")
    r = runner.invoke(cli_app, ["serve", "--port", "8125", "--api-key-file", str(tmp_path / "nope")])
    assert r.exit_code != 0 and "error:" in r.output and "api-key-file" in r.output
