"""``agentkit serve``: the one serve command (typer) builds its ServerConfig from its options and refuses bad
ones with one ``error:`` line, before any model is loaded."""

from __future__ import annotations

from typer.testing import CliRunner

from agentkit.cli import app


def test_serve_options_and_bad_values(monkeypatch):
    runner = CliRunner()
    help_text = runner.invoke(app, ["serve", "--help"], terminal_width=200).output
    for opt in ("--max-batch", "--max-queue", "--request-timeout-s", "--prepare-workers", "--ready-stall-s",
                "--default-mode", "--api-key"):
        assert opt in help_text, opt
    seen = {}

    def fake_run(engine_config, server_config, **kw):
        seen.update(engine=engine_config, server=server_config, **kw)

    monkeypatch.setattr("agentkit.serving.cli.run", fake_run)
    r = runner.invoke(app, ["serve", "--port", "8123", "--max-queue", "3", "--default-mode", "ar",
                            "--request-timeout-s", "9", "--compile-timeout-s", "2.5", "--compile-max-states", "99"])
    assert r.exit_code == 0, r.output
    s = seen["server"]
    assert (s.max_queue, s.default_mode, s.request_timeout_s, seen["port"]) == (3, "ar", 9.0, 8123)
    assert (s.compile_limits.max_seconds, s.compile_limits.max_states) == (2.5, 99)
    from agentkit.constrain.limits import CompileLimits

    runner.invoke(app, ["serve"])
    assert seen["server"].compile_limits == CompileLimits()  # the library's defaults unless given
    r = runner.invoke(app, ["serve", "--compile-timeout-s", "-1"])
    assert r.exit_code != 0 and "max_seconds" in r.output
    r = runner.invoke(app, ["serve", "--default-mode", "fast"])
    assert r.exit_code == 2 and "error:" in r.output and "default_mode" in r.output
    r = runner.invoke(app, ["serve", "--prepare-workers", "0"])
    assert r.exit_code == 2 and "prepare_workers" in r.output


def test_serve_model_names_and_max_n(monkeypatch):
    runner, seen = CliRunner(), {}
    monkeypatch.setattr("agentkit.serving.cli.run", lambda e, s, **kw: seen.update(server=s))
    r = runner.invoke(app, ["serve", "--port", "8124", "--served-model-name", "smol", "--served-model-name", "gpt-x",
                            "--max-n", "3"])
    assert r.exit_code == 0, r.output
    assert seen["server"].served_model_names == ("smol", "gpt-x") and seen["server"].max_n == 3
    runner.invoke(app, ["serve", "--port", "8124"])
    assert seen["server"].served_model_names == () and seen["server"].max_n == 8  # defaults: the engine's name
