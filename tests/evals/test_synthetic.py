"""Scoring held-out synthetic examples: right only when the output equals the generator's answer."""

from types import SimpleNamespace

from agentkit.config import DecodeConfig
from agentkit.evals.synthetic import score_examples
from agentkit.training.data import synthetic


class _Echo:
    """An engine that answers the first ``k`` examples right and the rest wrong, with fixed stats."""

    batches = False

    def __init__(self, examples, k):
        self.answers = {id(e.messages): e.answer for e in examples[:k]}

    def generate(self, messages, cfg, template=None, **kw):
        assert template is not None  # every example decodes under its own template
        text = self.answers.get(id(messages), "{}")
        stats = SimpleNamespace(forwards=4, output_tokens=8, latency_ms=10.0)
        return SimpleNamespace(text=text, stats=stats)


def test_score_examples_counts_exact_answers_and_forwards():
    exs = synthetic(5, seed=1)
    r = score_examples(_Echo(exs, 3), exs, DecodeConfig(mode="ar"))
    assert (r["n"], r["right"], r["task_success"]) == (5, 3, 0.6)
    assert r["forwards_mean"] == 4 and r["tokens_per_forward"] == 2 and r["latency_ms_p50"] == 10.0
