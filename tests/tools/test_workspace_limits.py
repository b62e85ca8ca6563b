"""Workspace hardening (issue 18): hard links, long and unencodable names, RE2 search, glob depth, read-only .git,
pytest options, and run_tests isolation by the OS (where ``unshare`` works; the fallback is said in the result)."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from agentkit.tools.sandbox import unshare_ok
from agentkit.tools.workspace import Workspace

from agentkit.errors import WorkspaceError


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    (root / "tests").mkdir(parents=True)
    (root / ".git").mkdir()
    (root / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    (root / "a.txt").write_text("hello\n" + "a" * 41 + "\n")
    (tmp_path / "secret.txt").write_text("top secret\n")
    return root


def test_hard_link_to_outside_file_refused(repo):
    os.link(repo.parent / "secret.txt", repo / "link.txt")
    ws = Workspace(repo)
    with pytest.raises(WorkspaceError, match="hard links"):
        ws.read_file("link.txt")
    assert not any("secret" in hit for hit in ws.search_text("secret"))
    with pytest.raises(WorkspaceError, match="hard links"):
        ws.apply_edits("link.txt\n<<<<<<< SEARCH\ntop secret\n=======\nx\n>>>>>>> REPLACE\n")


def test_long_and_unencodable_names_are_typed_errors(repo):
    ws = Workspace(repo)
    for call in (lambda: ws.read_file("x" * 300), lambda: ws.write_file("d/" + "y" * 300, "z"),
                 lambda: ws.read_file("a\ud800"), lambda: ws.write_file("b\udcff.txt", "z"),
                 lambda: ws.write_file("ok.txt", "text \ud800"), lambda: ws.search_text("\ud800")):
        with pytest.raises(WorkspaceError):
            call()


@pytest.mark.parametrize("regex", ["(a+)+$", "(a|aa)+c", "(x+x+)+y"])
def test_search_is_linear_time(repo, regex):
    ws = Workspace(repo)
    t0 = time.monotonic()
    ws.search_text(regex)
    assert time.monotonic() - t0 < 2


def test_search_refuses_backreferences_with_a_typed_error(repo):
    with pytest.raises(WorkspaceError, match="RE2"):
        Workspace(repo).search_text(r"(a)\1")


def test_glob_depth_bounded(repo):
    ws = Workspace(repo)
    d = repo
    for i in range(14):
        d = d / f"d{i}"
    d.mkdir(parents=True)
    (d / "f.zz").write_text("x\n")
    t0 = time.monotonic()
    want = [d.relative_to(repo).as_posix() + "/f.zz"]
    assert ws.list_files(".", "**/" * 15 + "*zz") == want  # repeated **/ collapse to one
    assert ws.list_files(".", "**/d3/**/*.zz") == want
    with pytest.raises(WorkspaceError, match="too complex"):
        ws.list_files(".", "**/d1/**/d2/**/d3/**/d4/**/*zz")
    assert time.monotonic() - t0 < 2


def test_git_dir_is_read_only(repo):
    ws = Workspace(repo)
    with pytest.raises(WorkspaceError, match=".git"):
        ws.write_file(".git/hooks/pre-commit", "#!/bin/sh\n")
    with pytest.raises(WorkspaceError, match=".git"):
        ws.apply_edits(".git/HEAD\n<<<<<<< SEARCH\nref: refs/heads/main\n=======\nx\n>>>>>>> REPLACE\n")
    assert "ref:" in ws.read_file(".git/HEAD")  # reading is fine


@pytest.mark.parametrize("args", [["-o", "cache_dir=/abs"], ["-ocache_dir=x"], ["--override-ini=cache_dir=x"],
                                  ["-p", "evil_plugin"], ["-pevil"], ["-c", "other.ini"], ["--rootdir", "x"]])
def test_pytest_options_refused(repo, args):
    with pytest.raises(WorkspaceError, match="not allowed|outside"):
        Workspace(repo).run_tests(args)


def _probe_test(body: str) -> str:
    return "import os, socket, subprocess, sys, time\n\n\ndef test_probe():\n" + body


def test_run_tests_environment_is_an_allow_list(repo, monkeypatch):
    monkeypatch.setenv("AGENTKIT_TEST_SECRET", "hunter2")
    (repo / "tests" / "test_env.py").write_text(_probe_test(
        "    assert 'AGENTKIT_TEST_SECRET' not in os.environ\n"))
    res = Workspace(repo).run_tests(["-q", "-p", "no:cacheprovider", "tests/test_env.py"])
    assert res["exit_code"] == 0, res["output"]


@pytest.mark.skipif(not unshare_ok(), reason="user namespaces / unshare unavailable here (fallback: no isolation)")
def test_run_tests_isolated_by_the_os(repo):
    outside = repo.parent / "outside.txt"
    (repo / "tests" / "test_iso.py").write_text(_probe_test(
        f"    try:\n        open({str(outside)!r}, 'w').write('x')\n        wrote = True\n"
        "    except OSError:\n        wrote = False\n"
        "    assert not wrote\n"
        "    open('inside.txt', 'w').write('ok')\n"
        "    try:\n        socket.create_connection(('1.1.1.1', 80), timeout=2)\n        net = True\n"
        "    except OSError:\n        net = False\n"
        "    assert not net\n"
        "    assert os.getpid() < 100  # own PID namespace\n"))
    res = Workspace(repo, isolation="unshare").run_tests(["-q", "-p", "no:cacheprovider", "tests/test_iso.py"])
    assert res["isolation"].startswith("unshare")
    assert res["exit_code"] == 0, res["output"]
    assert not outside.exists() and (repo / "inside.txt").read_text() == "ok"
