"""``should_stop``: decoding stops before the next forward once it returns True, keeping the committed output."""

import pytest

from agentkit.config import DecodeConfig


class StopAfter:
    """should_stop that turns True after ``n`` checks."""

    def __init__(self, n: int) -> None:
        self.n, self.calls = n, 0

    def __call__(self) -> bool:
        self.calls += 1
        return self.calls > self.n


@pytest.mark.parametrize("mode", ["ar", "diffusion", "verify"])
def test_should_stop_ends_decoding_at_the_next_forward(tiny, mode):
    cfg = DecodeConfig(mode=mode, max_new_tokens=64, canvas_length=8)
    full = tiny.generate("hello there", cfg)
    stop = StopAfter(3)
    part = tiny.generate("hello there", cfg, should_stop=stop)
    assert part.stats.finish_reason == "cancelled"
    assert part.stats.forwards < full.stats.forwards
    assert part.stats.forwards <= 1 + stop.n + 1  # prefill, one forward per check passed, at most one commit
    assert full.token_ids[: len(part.token_ids)] == part.token_ids  # what was committed is the same output


def test_should_stop_never_true_changes_nothing(tiny):
    cfg = DecodeConfig(max_new_tokens=16)
    assert tiny.generate("abc", cfg, should_stop=lambda: False).token_ids == tiny.generate("abc", cfg).token_ids
