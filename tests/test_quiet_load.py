"""Loading a model silences transformers' own warnings and progress bars, and restores them after."""

from transformers.utils import logging as hf_logging

from agentkit.models.loader import quiet_transformers


def test_quiet_transformers_silences_then_restores(monkeypatch):
    monkeypatch.delenv("AGENTKIT_LOAD_VERBOSE", raising=False)
    hf_logging.set_verbosity_warning()
    hf_logging.enable_progress_bar()
    with quiet_transformers():
        assert hf_logging.get_verbosity() == hf_logging.ERROR and not hf_logging.is_progress_bar_enabled()
    assert hf_logging.get_verbosity() == hf_logging.WARNING and hf_logging.is_progress_bar_enabled()
    monkeypatch.setenv("AGENTKIT_LOAD_VERBOSE", "1")
    with quiet_transformers():
        assert hf_logging.get_verbosity() == hf_logging.WARNING
