"""The repair adapter: the weights the repair loop's :class:`~agentkit.repair.ModelDrafter` drafts and scores with.

The adapter (``adapters/smollm2-135m-repair``, ``agentkit/training/repair_data.py`` and ``training/sft.py``) is an
``"ar"`` LoRA trained on the default model with the loop adapter merged in; its config names the loop adapter
(``AdapterConfig.on``), and loading stacks the two (``agentkit.models.adapter.load_adapter``), so an engine built
with ``EngineConfig(lora=<its folder>)`` runs the weights it was trained on. An adapter for other weights (another
base model, another loop adapter) is an :class:`~agentkit.errors.AdapterMismatchError` when the engine loads.

:func:`repair_engine` is the seam: ``adapter=None`` takes the shipped adapter when :data:`ON_BY_DEFAULT` holds and
the folder is there, else the default engine (today's weights); ``"none"`` the default engine; a path that adapter.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from ..config import NO_LORA
from ..models.adapter import FILE, LOOP_DIR

REPAIR_DIR = LOOP_DIR.parent / "smollm2-135m-repair"
#: whether ``repair_engine()`` (the coding assistant's drafter) uses the shipped adapter without being asked: on the
#: repair benchmark's held-out split it fixes as many bugs as the default engine, 39 of 44, with more of them right
#: (adapters/smollm2-135m-repair/MODEL_CARD.md)
ON_BY_DEFAULT = True
log = logging.getLogger("agentkit.repair")


def shipped() -> Path | None:
    """The shipped repair adapter's folder, or None when this install has none."""
    return REPAIR_DIR if (REPAIR_DIR / FILE).is_file() else None


def resolve(adapter: str | Path | None) -> str | None:
    """The LoRA path an engine for the drafter merges: None for the default engine's own weights."""
    if adapter is None:
        return str(REPAIR_DIR) if ON_BY_DEFAULT and shipped() else None
    if str(adapter) == NO_LORA:
        return None
    return str(adapter)


def repair_engine(adapter: str | Path | None = None, *, model: str | None = None) -> Any:
    """An engine for the repair loop's drafter (see the module docstring); ``model``: ``EngineConfig.model``."""
    from ..config import EngineConfig
    from ..engine import default_engine
    from ..engine.engine import Engine

    path = resolve(adapter)
    if path is None:
        return default_engine(model)
    log.info("repair drafter: %s merged (stacked on the adapter it was trained on)", path)
    return Engine(EngineConfig(model=model, lora=path))
