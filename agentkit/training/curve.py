"""The training loss curve (``log.jsonl`` -> PNG), for both trainers: ``python -m agentkit.training`` (the
block-diffusion adapter) and ``python -m agentkit.training.sft`` (the loop adapter)."""

from __future__ import annotations

import json
import statistics
from pathlib import Path


def plot_loss(log: Path, png: Path, title: str = "block-diffusion adaptation",
              ylabel: str = "masked-token cross entropy") -> list[tuple[int, float, int]]:
    recs = [json.loads(x) for x in log.read_text().splitlines() if x.strip()] if log.is_file() else []
    pts = [(r["step"], r["loss"], r["tokens"]) for r in recs]
    if pts:
        from .._extras import require

        require("evals", "the training loss plot")
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(figsize=(6, 3.5))
        ax.plot([p[2] for p in pts], [p[1] for p in pts], lw=0.8, alpha=0.5, label="per step")
        k = max(1, len(pts) // 20)
        smooth = [statistics.mean(p[1] for p in pts[max(0, i - k + 1): i + 1]) for i in range(len(pts))]
        ax.plot([p[2] for p in pts], smooth, lw=2, label=f"mean of {k}")
        ax.set_xlabel("tokens seen")
        ax.set_ylabel(ylabel)
        ax.set_title(title)
        ax.legend()
        fig.tight_layout()
        fig.savefig(png, dpi=100)
        plt.close(fig)
    return pts
