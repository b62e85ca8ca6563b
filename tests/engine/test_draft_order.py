"""Verify's drafts without a drafter model: prompt lookup's guess first, the last check's stale continuations only
where lookup has none (the stale ones follow a rejected draft, so they are guesses after a token that was not kept)."""

import pytest

from agentkit.config import DecodeConfig
from agentkit.engine import decode
from agentkit.engine.engine import Engine
from agentkit.models.tiny import tiny_llama

PROMPTS = ["the cat sat on the mat and the cat", "a b c a b c a b", "hello world"]


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_stale_continuations_never_displace_prompt_lookups_guess(seed, monkeypatch):
    eng = Engine.from_loaded(tiny_llama(seed))
    cfg = DecodeConfig(mode="verify", max_new_tokens=24, canvas_length=8)
    clean = {p: eng.generate(p, cfg, raw=True) for p in PROMPTS}
    # these tiny models repeat one token, which lookup guesses from the output so far: every draft is lookup's
    assert all(r.stats.accepted_slot_tokens > 0 for r in clean.values())
    written = {t for r in clean.values() for t in r.token_ids}
    bad = next(t for t in range(5, 500) if t not in written)
    keep_checked = decode.Decoder._keep_checked

    def wrong_continuations(self, *args):
        _, ended = keep_checked(self, *args)
        return [bad] * 8, ended  # continuations greedy never writes

    monkeypatch.setattr(decode.Decoder, "_keep_checked", wrong_continuations)
    for p, want in clean.items():
        got = eng.generate(p, cfg, raw=True)
        assert got.token_ids == want.token_ids
        assert got.stats.forwards == want.stats.forwards  # the wrong continuations were never drafted
