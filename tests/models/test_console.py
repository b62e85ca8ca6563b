"""One-time load steps show progress on stderr; transformers' own bars stay off."""

import io

from agentkit.engine.engine import Engine
from agentkit.models import console
from agentkit.models.tiny import tiny_merged_q4_lora


def test_a_first_use_step_prints_lines_off_a_terminal(capsys):
    with console.first_use_step("fitting things", 8) as advance:
        for _ in range(8):
            advance()
    err = capsys.readouterr().err.splitlines()
    assert err[0] == "agentkit: fitting things ..."
    assert [line.split(":")[2].split()[0] for line in err[1:-1]] == ["2/8", "4/8", "6/8"]
    assert err[-1].startswith("agentkit: fitting things: done in ")


def test_a_first_use_step_draws_a_bar_on_a_terminal(monkeypatch):
    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    tty = Tty()
    monkeypatch.setattr(console.sys, "stderr", tty)
    with console.first_use_step("fitting things", 2) as advance:
        advance(2)
    assert "agentkit: fitting things" in tty.getvalue()


def test_fitting_a_merged_loras_grids_shows_progress_once(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("AGENTKIT_CACHE", str(tmp_path / "cache"))
    Engine.from_loaded(tiny_merged_q4_lora(tmp_path)[0])
    err = capsys.readouterr().err
    assert "agentkit: fitting the loop adapter's 4-bit grids to 14 layers" in err and "done in" in err
    Engine.from_loaded(tiny_merged_q4_lora(tmp_path)[0])  # read back from the cache: nothing to show
    assert "fitting" not in capsys.readouterr().err
