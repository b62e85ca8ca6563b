"""OpenMP's wait policy, set before torch loads: passive (idle threads sleep, they do not spin).

torch's CPU kernels run on OpenMP (libgomp). By default an OpenMP thread that finishes its share of a parallel
region spins before it sleeps, and a region ends only when every thread of its team has arrived. On a busy machine
(more runnable threads than cores) a spinning or descheduled team thread holds up every region, and a decoding
step has hundreds of small ones: the same 40-token ``Engine.generate`` took 72.7 s on the main thread of a loaded
2-core machine and 1.14 s in a worker thread (issue 33). With ``OMP_WAIT_POLICY=PASSIVE`` idle team threads yield
the core at once; figures in docs/threads.md (evals/bench_threads.py).

libgomp reads the variable once, when torch loads, so :func:`passive_openmp` runs when this module is imported
(the first thing ``agentkit`` does), before anything imports torch; an ``OMP_WAIT_POLICY`` the user set is left as
it is. Where torch was loaded first, the engine warns once (agentkit/engine/engine.py).
"""

from __future__ import annotations

import os
import sys

APPLIED = False  # whether agentkit set OMP_WAIT_POLICY itself (before torch loaded)
WARNED = False  # the engine warned once that torch loaded first with libgomp's spinning default


SMALL = 4  # cores: at most this many, the default is one torch thread


def default_threads() -> int | None:
    """``EngineConfig.threads=None``: 1 on a machine of at most :data:`SMALL` cores (one busy neighbour -- another
    process, a second request -- takes half of it, and a team of OpenMP threads then waits for the scheduler at
    every region even with the passive policy: docs/threads.md), None (torch's own, one per core) on a larger one."""
    return 1 if (os.cpu_count() or 1) <= SMALL else None


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
