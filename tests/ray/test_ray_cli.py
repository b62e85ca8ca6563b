"""The ``--ray`` options on the command line: without Ray installed, one line naming the extra."""

from __future__ import annotations

import sys

import pytest
from typer.testing import CliRunner

from agentkit.cli import app


@pytest.mark.parametrize("args", [["serve", "--ray", "--replicas", "2"],
                                  ["eval", "bfcl", "--data", ".", "--ray", "local", "--workers", "2"]])
def test_ray_missing_names_the_extra(args, monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)  # import ray -> ImportError
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 2, res.output
    lines = [ln for ln in res.output.splitlines() if ln.strip()]
    assert len(lines) == 1, lines
    assert "pip install 'agentkit[ray]'" in lines[0] and "--ray" in lines[0]


def test_bad_autoscale_and_workers_are_named(monkeypatch):
    pytest.importorskip("ray")
    res = CliRunner().invoke(app, ["serve", "--ray", "--autoscale", "4"])
    assert res.exit_code == 2 and "--autoscale expects MIN,MAX" in res.output
    res = CliRunner().invoke(app, ["serve", "--ray", "--autoscale", "3,1"])
    assert res.exit_code == 2 and "--autoscale" in res.output
    res = CliRunner().invoke(app, ["eval", "bfcl", "--data", ".", "--ray", "local", "--workers", "0"])
    assert res.exit_code == 2 and "--workers must be >= 1" in res.output
