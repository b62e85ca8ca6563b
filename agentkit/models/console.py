"""What loading a model prints: a progress bar on stderr for each one-time step that takes seconds (dequantizing
the embedded GGUF, fitting a merged LoRA's 4-bit grids), and transformers' own warnings and bars kept off.

On a terminal a step is a rich bar; elsewhere (a log, a CI job, a notebook's captured stderr) it is a line when it
starts, a line at each quarter, and a line with its time when it ends, so a first run never sits silent.
``AGENTKIT_LOAD_VERBOSE=1`` keeps transformers' output as well.
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
from collections.abc import Callable, Iterator


@contextlib.contextmanager
def first_use_step(description: str, total: int) -> Iterator[Callable[[int], None]]:
    """A progress bar on stderr for a one-time step of ``total`` units; yields ``advance(n=1)``."""
    stream = sys.stderr
    if stream.isatty():
        from rich.console import Console
        from rich.progress import BarColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

        with Progress(SpinnerColumn(), TextColumn("{task.description}"), BarColumn(), TimeElapsedColumn(),
                      console=Console(file=stream), transient=False) as progress:
            task = progress.add_task(f"agentkit: {description}", total=total)
            yield lambda n=1: progress.advance(task, n)
        return
    t0, done, shown = time.perf_counter(), 0, 0
    print(f"agentkit: {description} ...", file=stream, flush=True)

    def advance(n: int = 1) -> None:
        nonlocal done, shown
        done += n
        quarter = 4 * done // max(1, total)
        if shown < quarter < 4:
            shown = quarter
            print(f"agentkit: {description}: {done}/{total} ({time.perf_counter() - t0:.0f} s)", file=stream,
                  flush=True)

    yield advance
    print(f"agentkit: {description}: done in {time.perf_counter() - t0:.1f} s", file=stream, flush=True)


@contextlib.contextmanager
def quiet_transformers() -> Iterator[None]:
    """transformers' warnings and progress bars off while agentkit loads a model: what they say (a GGUF-packed
    checkpoint asked for in bf16, the weights' loading bar) concerns choices agentkit made, not the user's; agentkit
    shows its own one-time steps (:func:`first_use_step`). ``AGENTKIT_LOAD_VERBOSE=1`` keeps them."""
    if os.environ.get("AGENTKIT_LOAD_VERBOSE") == "1":
        yield
        return
    from transformers.utils import logging as hf_logging

    level, bars = hf_logging.get_verbosity(), hf_logging.is_progress_bar_enabled()
    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        hf_logging.set_verbosity(level)
        if bars:
            hf_logging.enable_progress_bar()
