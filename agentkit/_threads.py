"""OpenMP's wait policy, set before torch loads: passive (idle threads sleep, they do not spin).

torch's CPU kernels run on OpenMP (libgomp). By default an OpenMP thread that finishes its share of a parallel
region spins for a while before it sleeps, and a region ends only when every thread of its team has arrived. On a
busy machine (more runnable threads than cores: another process, other requests) a team thread is often
descheduled, and the calling thread waits for it a whole scheduler slice per region; a decoding step has hundreds of
regions. That is how the same 40-token ``Engine.generate`` took 72.7 s on the main thread of a loaded 2-core machine
and 1.14 s in a worker thread (issue 33; docs/threads.md). With ``OMP_WAIT_POLICY=PASSIVE`` the threads yield the
core instead, and the main thread is as fast as a worker (evals/bench_threads.py).

libgomp reads the variable once, when torch is loaded, so :func:`passive_openmp` runs when this module is imported (first thing ``agentkit`` does),
before anything imports torch; an ``OMP_WAIT_POLICY`` the user set is left as it is.
"""

from __future__ import annotations

import os
import sys

APPLIED = False  # whether agentkit set OMP_WAIT_POLICY itself (before torch loaded)
WARNED = False  # the engine warned once that torch loaded first with libgomp's spinning default


def passive_openmp() -> bool:
    """Set ``OMP_WAIT_POLICY=PASSIVE`` unless it is set or torch is already loaded; returns whether the policy in
    effect is agentkit's (or the user's) rather than libgomp's default."""
    global APPLIED
    if "OMP_WAIT_POLICY" in os.environ:
        return True
    if "torch" in sys.modules:
        return False
    os.environ["OMP_WAIT_POLICY"] = "PASSIVE"
    APPLIED = True
    return True


passive_openmp()
