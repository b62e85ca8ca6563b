"""Issue 36: a ``trace_path`` that cannot be a JSONL file is a typed error naming it, not a raw OSError."""

from __future__ import annotations

import pytest

from agentkit.errors import InvalidRequestError
from agentkit.sdk._trace import Trace


def test_a_directory_trace_path_is_a_typed_error(tmp_path):
    with pytest.raises(InvalidRequestError, match="trace_path .* is a directory"):
        Trace(path=str(tmp_path))


def test_a_trace_path_in_a_missing_directory_is_a_typed_error(tmp_path):
    with pytest.raises(InvalidRequestError, match="does not exist"):
        Trace(path=str(tmp_path / "nope" / "t.jsonl"))


def test_a_file_trace_path_is_fine(tmp_path):
    assert Trace(path=str(tmp_path / "t.jsonl")).path.endswith("t.jsonl")
