"""Program repair by generate and validate: localise the failing tests' fault, draft candidate line edits
(mutation operators or a language model under a code-edit template), validate each on a scratch copy, and write
the first one that passes every test. See ``loop.repair``."""

from .draft import DRAFT_MODES, LineDrafter, ModelDrafter, OperatorDrafter, Site
from .loop import RepairBudget, RepairResult, repair
from .mutate import KINDS, LineEdit

__all__ = ["DRAFT_MODES", "KINDS", "LineDrafter", "LineEdit", "ModelDrafter", "OperatorDrafter", "RepairBudget",
           "RepairResult", "Site", "repair"]
