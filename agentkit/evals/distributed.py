"""Eval items on Ray actors: ``agentkit eval SUITE ... --ray [local|ADDRESS] --workers N``.

Each worker is a Ray actor that loads the engine once (``__init__``) and then runs whole items: every mode of an
item on the same actor, one after another, with :func:`agentkit.evals.runner.run_item` -- the code a local run
uses -- so the latency ratios between modes stay fair (same process, same warm caches). The driver keeps up to
``in_flight`` items queued per actor, takes results as they finish (``ray.wait``), and hands them to
:func:`agentkit.evals.runner.run_eval`, which writes the JSON after every item and computes the per-mode summary,
ratios and plots exactly as for a local run. Rows are stored in item order, so a distributed run's JSON lists the
same rows as a local one. An interrupted run keeps what finished (the partial JSON); its actors are killed.

A worker that dies is restarted once by Ray and its item retried (``max_restarts=1``, ``max_task_retries=1``).
"""

from __future__ import annotations

import importlib
import random
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from .._ray import connect, require_ray
from ..errors import UserError
from .runner import ItemResult, RunSettings, build_engine, diffusion_variant, get_suite, run_item


@dataclass
class RayEvalConfig:
    """Where and how the items run. ``address``: ``"local"`` (a Ray instance on this machine, 127.0.0.1) or a
    cluster address (``auto``, ``HOST:6379``, ``ray://HOST:10001``); a Ray already initialised in this process is
    used as it is. ``engine_factory``: ``"module:function"`` returning an engine, instead of loading ``model``
    (tests use ``agentkit.engine:tiny_engine``). ``runtime_env``: Ray's runtime environment for the workers
    (e.g. ``{"pip": ["agentkit[ray]"]}`` or ``{"working_dir": "."}`` on a cluster without agentkit installed)."""

    address: str = "local"
    workers: int = 2
    model: str | None = None
    adapter: str | None = None
    dtype: str = "auto"  # EngineConfig.dtype / .backend of each worker's engine
    backend: str = "auto"
    pass_width: int | None = None  # EngineConfig.pass_width
    lora: str | None = None  # EngineConfig.lora
    seed: int = 0
    threads: int | None = 1
    num_cpus_per_worker: float = 1.0
    in_flight: int = 2
    engine_factory: str | None = None
    runtime_env: dict[str, Any] | None = None
    local_num_cpus: float | None = None  # CPUs of a local Ray instance (default: every core)

    def __post_init__(self) -> None:
        if self.workers < 1:
            raise UserError(f"--workers must be >= 1, got {self.workers}")
        if self.in_flight < 1:
            raise UserError(f"in_flight must be >= 1, got {self.in_flight}")
        if self.num_cpus_per_worker < 0:
            raise UserError(f"num_cpus_per_worker must be >= 0, got {self.num_cpus_per_worker}")
        if not self.address:
            raise UserError("--ray needs 'local' or a Ray cluster address")
        if self.engine_factory is not None and ":" not in self.engine_factory:
            raise UserError(f"engine_factory must be 'module:function', got {self.engine_factory!r}")


def _load_factory(spec: str) -> Callable[[], Any]:
    module, _, name = spec.partition(":")
    return getattr(importlib.import_module(module), name)


class EvalWorker:
    """One Ray actor: the engine, loaded once; ``run`` does every mode of one item (see the module docstring)."""

    def __init__(self, cfg: RayEvalConfig) -> None:
        import torch

        random.seed(cfg.seed)
        torch.manual_seed(cfg.seed)
        if cfg.threads:
            torch.set_num_threads(cfg.threads)
        if cfg.engine_factory:
            self.engine = _load_factory(cfg.engine_factory)()
        else:
            self.engine = build_engine(cfg.model, cfg.seed, cfg.threads, cfg.adapter, cfg.dtype, cfg.backend,
                                       cfg.pass_width, cfg.lora)

    def info(self) -> dict[str, str]:
        return {"model": getattr(self.engine, "name", "?"), "diffusion": diffusion_variant(self.engine)}

    def run(self, suite: str, index: int, item: Any, modes: list[str], settings: RunSettings) -> ItemResult:
        return run_item(get_suite(suite), self.engine, item, index, modes, settings.context())


@dataclass
class RayExecutor:
    """The Ray executor for :func:`agentkit.evals.runner.run_eval` (``executor=``): same interface as
    :class:`agentkit.evals.runner.LocalExecutor`."""

    config: RayEvalConfig
    _actors: list[Any] = field(default_factory=list, init=False)
    _started_ray: bool = field(default=False, init=False)

    def __post_init__(self) -> None:
        ray = require_ray()
        cfg = self.config
        self._started_ray = connect(cfg.address, num_cpus=cfg.local_num_cpus, runtime_env=cfg.runtime_env)
        actor = ray.remote(EvalWorker).options(num_cpus=cfg.num_cpus_per_worker, max_restarts=1,
                                               max_task_retries=1)
        self._actors = [actor.remote(cfg) for _ in range(cfg.workers)]

    @property
    def command_args(self) -> tuple[str, ...]:
        return ("--ray", self.config.address, "--workers", str(self.config.workers))

    def info(self) -> dict[str, str]:
        ray = require_ray()
        return ray.get(self._actors[0].info.remote())

    def run(self, suite: str, jobs: list[tuple[int, Any]], modes: list[str], settings: RunSettings,
            on_mode: Callable[[str, str], None] | None = None) -> Iterator[ItemResult]:
        """Yield each item's result as it finishes; ``on_mode`` is not called (modes run remotely)."""
        ray = require_ray()
        todo = list(reversed(jobs))
        pending: dict[Any, int] = {}  # object ref -> actor index
        load = [0] * len(self._actors)

        def fill() -> None:
            while todo:
                a = min(range(len(self._actors)), key=load.__getitem__)
                if load[a] >= self.config.in_flight:
                    return
                index, item = todo.pop()
                pending[self._actors[a].run.remote(suite, index, item, modes, settings)] = a
                load[a] += 1

        fill()
        while pending:
            ready, _ = ray.wait(list(pending), num_returns=1)
            for ref in ready:
                load[pending.pop(ref)] -= 1
                result = ray.get(ref)
                fill()
                yield result

    def close(self) -> None:
        ray = require_ray()
        for a in self._actors:
            ray.kill(a)
        self._actors = []
        if self._started_ray:
            ray.shutdown()
            self._started_ray = False
