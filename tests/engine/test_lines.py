"""A ``jsonl`` template's output ends at its first repeated line (``agentkit/engine/lines.py``), the same in every
mode: a repeated call is dropped, not decoded up to the template's bound."""

from __future__ import annotations

import pytest

from agentkit.config import DecodeConfig
from agentkit.engine.lines import RepeatedLine
from agentkit.toolcall import calls_template

W = {"type": "object", "properties": {"city": {"type": "string", "maxLength": 6}}, "required": ["city"],
     "additionalProperties": False}


def _decoder(text_of):
    return RepeatedLine(lambda ids: "".join(text_of[i] for i in ids), list)


def test_the_check_fires_on_a_complete_repeated_line_only():
    pieces = ['{"a": 1}', "\n", '{"b": 2}', "\n", '{"b"', ': 2}']
    chk = _decoder(pieces)
    ids: list[int] = []
    chk.out = lambda: ids
    fired = []
    for i in range(len(pieces)):
        ids.append(i)
        fired.append(chk.check())
    assert fired == [False, False, False, False, False, True]  # '{"b"' alone is not a value yet
    assert chk.cut(ids) == ('{"a": 1}\n{"b": 2}', [0, 1, 2])
    assert _decoder(["{}", "\n", '{"x":1}']).cut([0, 1, 2]) is None
    # key order and spacing do not matter
    assert _decoder(['{"a":1,"b":2}', "\n", '{"b": 2, "a": 1}']).cut([0, 1, 2]) == ('{"a":1,"b":2}', [0])


@pytest.mark.parametrize("mode", ["ar", "verify", "diffusion"])
def test_every_mode_stops_at_the_repeat(mode):
    from agentkit.engine import tiny_engine

    eng = tiny_engine(0)
    tpl = calls_template([("get_weather", W)], max_calls=4)
    res = eng.generate([{"role": "user", "content": "weather?"}], DecodeConfig(mode=mode, max_new_tokens=160),
                       template=tpl)
    # the greedy tiny model writes the same call again and again: one line is kept, complete
    assert res.stats.finish_reason == "template" and len(res.value) == 1 and "\n" not in res.text
    assert res.stats.output_tokens == len(res.token_ids)
    assert eng.tokenizer.decode(res.token_ids, skip_special_tokens=False) == res.text
