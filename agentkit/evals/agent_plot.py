"""The agent-loop benchmark's plot: the rates per framework and mode (left) and iteration latency p50 by iteration
index with the whole-run p50 (right)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import numpy as np

RATES = (("success", "task_success"), ("finished", "finished_rate"), ("right call", "right_call_rate"),
         ("BFCL single", "bfcl_single_call_success"), ("answer has result", "answer_has_result_rate"),
         ("no tool", "no_tool_rate"), ("no-tool answer", "no_tool_answer_rate"), ("2-tool right", "two_tool_right_rate"),
         ("fail-once recovered", "fail_once_recovered_rate"))  # a rate that is None (not measured) is drawn as "n/a"


def _rows(result: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    return [(f"{fw}\n{mode}", s) for fw, modes in result.get("summary", {}).items() for mode, s in modes.items()]


def plot_agent_loop(result: dict[str, Any], path: Path) -> Path:
    """Write the plot to ``path`` (PNG); returns it."""
    rows = _rows(result)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(max(10, 2.6 * len(rows) + 6), 4.6))
    x = np.arange(len(RATES))
    w = 0.8 / max(len(rows), 1)
    for k, (label, s) in enumerate(rows):
        raw = [s.get(key) for _, key in RATES]
        bars = a1.bar(x + (k - (len(rows) - 1) / 2) * w, [v or 0.0 for v in raw], w, label=label.replace("\n", " · "))
        for b, v in zip(bars, raw):
            a1.annotate("n/a" if v is None else f"{v:.2f}", (b.get_x() + b.get_width() / 2, b.get_height()),
                        ha="center", va="bottom", fontsize=6, rotation=90, xytext=(0, 1), textcoords="offset points")
    a1.set_xticks(x, [r for r, _ in RATES], rotation=25, ha="right", fontsize=8)
    a1.set_ylim(0, 1.35)
    a1.set_ylabel("rate")
    a1.set_title("agent runs")
    a1.legend(fontsize=7, loc="upper center", ncol=min(len(rows), 3))
    xs = np.arange(len(rows))
    for i, key in enumerate(("1", "2", "3")):
        vals = [s["iteration_latency_ms"][key]["p50"] for _, s in rows]
        a2.bar(xs + (i - 1.5) * 0.2, vals, 0.2, label=f"iteration {key} p50")
    a2.bar(xs + 1.5 * 0.2, [s["run_latency_ms_p50"] for _, s in rows], 0.2, label="whole run p50")
    a2.set_xticks(xs, [r for r, _ in rows], fontsize=8)
    a2.set_ylabel("ms")
    a2.set_title("latency (peers: iterations timed only for the openai loop)")
    a2.legend(fontsize=7)
    n = max((s["n"] for _, s in rows), default=0)
    fig.suptitle(f"agent-loop · {result.get('model', '')} · n={n} tasks · max_iterations "
                 f"{result.get('max_iterations')}", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path
