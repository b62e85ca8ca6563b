"""The decoding config of one agent step: the agent's and the run's settings, the step's mode and budget, and the
copy prior's source."""

from __future__ import annotations

from dataclasses import replace

from ..config import DecodeConfig
from ..steps import kinds as steps
from ..toolcall import result_values
from . import _settings as settings_
from ._result import RunState


def step_config(decode: DecodeConfig, run: RunState, step: str, max_new: int, plain_weights: str | None) -> DecodeConfig:
        """The step's decoding config: the agent's, the merged model settings, the step's mode and token budget;
        a retry samples (``_settings.for_retry``) so it can differ from the output it retries. ``plain_weights``:
        a reply's weights when it carries no tool result (None: the agent offered tools, and the answer after the
        decision not to call is a loop step, on the adapter's weights)."""
        config = settings_.apply(decode, run.settings)
        config = replace(config, mode=run.routing.mode_for(step),
                         max_new_tokens=max_new)
        config = copy_config(run, step, config)
        if step == "reply" and plain_weights and not run.results.calls and config.weights == "auto":
            config = replace(config, weights=plain_weights)
        if step == "reply" and not config.stop_loops and "stop_loops" not in run.settings:
            config = replace(config, stop_loops=steps.REPLY_STOP_LOOPS)
        return settings_.for_retry(config, run.failures) if run.failures else config


def copy_config(run: RunState, step: str, config: DecodeConfig) -> DecodeConfig:
    """The copy prior's source for a run's steps (unless the config or the run's settings name one):

    - ``tool_call`` after tool results: the user's prompt and the results' values
      (:func:`agentkit.toolcall.result_values`), so a call can pass on a value an earlier call returned (the
      second call of a lookup-then-act task);
    - ``reply`` after tool results: the results' values, so the answer can copy a returned value exactly (a free
      reply gets the prior only with a source);
    - ``extract`` (the output type): the user's prompt and the results' values, with the number prior at a
      number's first digit, as :func:`agentkit.extract` does. Without it the source was the step's last user
      message, which holds the schema: a description's words were copied as values (``day='Weekday of the
      Meeting'``).

    Otherwise (a first tool step, a plan) the config's own ``copy_from``: the last user message."""
    bonus = config.copy_text_bias if step == "reply" else config.copy_bias
    if step not in ("tool_call", "reply", "extract") or not bonus or config.copy_source is not None \
            or "copy_from" in run.settings:
        return config
    values = result_values([text for _, _, text in run.results.calls.values()])
    if step == "reply":
        return replace(config, copy_source=values) if values else config
    source = "\n".join(x for x in (run.prompt, values) if x)
    if step == "tool_call":
        return replace(config, copy_source=source) if values else config
    return replace(config, copy_source=source, copy_first_digit=True)
