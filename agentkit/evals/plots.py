"""Plots of an eval result (matplotlib, Agg): latency and success per mode, tokens per forward, canvas evolution.

``plot_all(result, Path("x.png"))`` writes ``x.png`` (latency p50/p95 and task success/validity per mode),
``x.tpf.png`` (tokens per forward, with and without pinned tokens) and, when the result holds a canvas example,
``x.canvas.png`` (rows = denoising steps of one diffusion generation; each position coloured by the step at which
it became final; template-pinned positions grey).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .._extras import require

require("evals", "eval plots")

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.patches import Patch


def sibling(path: Path, tag: str) -> Path:
    """``x.png`` -> ``x.<tag>.png``."""
    path = Path(path)
    return path.with_name(f"{path.stem}.{tag}{path.suffix or '.png'}")


def _title(result: dict) -> str:
    n = max((s.get("n", 0) for s in result.get("modes", {}).values()), default=0)
    return f"{result.get('suite', '')} · {result.get('model', '')} · n={n}"


def _bars(ax, modes: list[str], series: list[tuple[str, list[float]]], fmt: str) -> None:
    x = np.arange(len(modes))
    w = 0.8 / max(len(series), 1)
    for k, (label, vals) in enumerate(series):
        bars = ax.bar(x + (k - (len(series) - 1) / 2) * w, vals, w, label=label)
        for b, v in zip(bars, vals):
            ax.annotate(fmt.format(v), (b.get_x() + b.get_width() / 2, b.get_height()), ha="center", va="bottom",
                        fontsize=7, xytext=(0, 1), textcoords="offset points")
    ax.set_xticks(x, modes)
    ax.legend(fontsize=8)


def plot_summary(result: dict, path: Path) -> Path:
    modes = list(result.get("modes", {}))
    s = result["modes"]
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(max(8, 2.2 * len(modes) + 4), 4))
    _bars(a1, modes, [("p50", [s[m]["latency_ms_p50"] for m in modes]),
                      ("p95", [s[m]["latency_ms_p95"] for m in modes])], "{:.0f}")
    a1.set_ylabel("complete-request latency (ms)")
    a1.set_title("latency per request")
    _bars(a2, modes, [("task success", [s[m]["task_success"] for m in modes]),
                      ("schema valid", [s[m]["valid_rate"] for m in modes])], "{:.2f}")
    a2.set_ylim(0, 1.12)
    a2.set_ylabel("rate")
    a2.set_title("task success and validity")
    fig.suptitle(_title(result), fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return Path(path)


def plot_tpf(result: dict, path: Path) -> Path:
    modes = list(result.get("modes", {}))
    s = result["modes"]
    fig, ax = plt.subplots(figsize=(max(6, 1.6 * len(modes) + 3), 4))
    _bars(ax, modes, [("all output tokens", [s[m]["tokens_per_forward"] for m in modes]),
                      ("excluding pinned", [s[m]["tokens_per_forward_excl_pinned"] for m in modes])], "{:.2f}")
    ax.set_ylabel("output tokens per forward (after prefill)")
    ax.set_title(_title(result) + " · tokens per forward", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return Path(path)


def _show(text: str) -> str:
    t = text.replace("\n", "⏎").replace("\t", "⇥").replace(" ", "␣")
    return t if len(t) <= 10 else t[:9] + "…"


def plot_canvas(example: dict[str, Any], path: Path) -> Path:
    """Rows: denoising steps (every block of the generation, top to bottom), then the committed output.
    Columns: output positions after the pinned run that went into the prefill. Cell colour: the step at which the
    position became final (viridis); grey: pinned by the template; white: still open (the draft fed is written in
    grey); light grey: committed in an earlier block."""
    out, pinned = example["output"], example["pinned"]
    text = {int(k): v for k, v in example.get("token_text", {}).items()}
    lead, blocks = example.get("lead_pinned", 0), example.get("blocks", [])
    end = len(out)  # drafts past the end of the output were discarded: not drawn
    ncols = max(end - lead, 1)
    rows: list[tuple[int, dict]] = [(bi, s) for bi, b in enumerate(blocks) for s in b["steps"]]
    nrows = len(rows) + 1
    # the step at which each position became final
    decided: dict[int, int] = {}
    r = 0
    for b in blocks:
        first = r
        for s in b["steps"]:
            for j, f in enumerate(s["frozen"]):
                p = b["offset"] + j
                if f and p not in decided:
                    decided[p] = r
            r += 1
        for j in range(max((len(s["tokens"]) for s in b["steps"]), default=0)):
            decided.setdefault(b["offset"] + j, r if b["steps"] else first)  # final at the block's last layout
    total = max(len(rows), 1)
    cmap = plt.get_cmap("viridis")
    grey, light, white = (0.55, 0.55, 0.55, 1), (0.88, 0.88, 0.88, 1), (1, 1, 1, 1)
    img = np.ones((nrows, ncols, 4))
    labels: list[tuple[int, int, str, str]] = []
    for ri, (bi, s) in enumerate(rows):
        off = blocks[bi]["offset"]
        for c in range(ncols):
            p = lead + c
            j = p - off
            if p < off:
                img[ri, c] = light
            elif j >= len(s["tokens"]):
                img[ri, c] = white
            elif p < len(pinned) and pinned[p] and s["tokens"][j] == out[p]:  # placed (once the choices before it
                # were made: until then the template cannot say where the pinned text goes)
                img[ri, c] = grey
                labels.append((ri, c, text.get(s["tokens"][j], "?"), "white"))
            elif s["frozen"][j]:
                img[ri, c] = cmap(decided.get(p, ri) / total)
                labels.append((ri, c, text.get(s["tokens"][j], "?"), "white"))
            else:
                img[ri, c] = white
                labels.append((ri, c, text.get(s["tokens"][j], "?"), "0.5"))
    for c in range(ncols):  # the committed output
        p = lead + c
        if p >= len(out):
            continue
        img[nrows - 1, c] = grey if pinned[p] else cmap(decided.get(p, total) / total)
        labels.append((nrows - 1, c, text.get(out[p], "?"), "white"))
    fig, ax = plt.subplots(figsize=(min(max(7, 0.32 * ncols + 2.5), 40), min(max(3.2, 0.42 * nrows + 2.2), 40)),
                           layout="constrained")
    ax.imshow(img, aspect="auto", interpolation="nearest")
    if ncols <= 96:
        for ri, c, t, color in labels:
            ax.text(c, ri, _show(t), ha="center", va="center", rotation=90, fontsize=5.5, color=color)
    ax.set_yticks(range(nrows), [f"step {i + 1} (block {bi + 1})" for i, (bi, _) in enumerate(rows)] + ["output"],
                  fontsize=7)
    ax.set_xticks(range(0, ncols, max(1, ncols // 16)))
    ax.set_xlabel(f"output position (after {lead} pinned prefix tokens placed in the prefill)")
    for b in blocks[1:]:
        ax.axvline(b["offset"] - lead - 0.5, color="red", lw=0.8)
    ax.axhline(nrows - 1.5, color="black", lw=0.8)
    sm = plt.cm.ScalarMappable(cmap=cmap, norm=plt.Normalize(0, total))
    fig.colorbar(sm, ax=ax, fraction=0.03, pad=0.01).set_label("passes before final", fontsize=8)
    fig.legend(handles=[Patch(color=grey, label="pinned by the template"),
                        Patch(facecolor=white, edgecolor="0.6", label="open (draft shown in grey)"),
                        Patch(color=light, label="committed in an earlier block")],
               loc="outside lower center", ncol=3, fontsize=7, frameon=False)
    ax.set_title(f"canvas evolution · {example.get('id', '')} · {example.get('mode', '')} · {len(rows)} denoising "
                 f"steps · canvas {example.get('canvas_length', '')}", fontsize=9)
    fig.savefig(path, dpi=130)
    plt.close(fig)
    return Path(path)


def plot_all(result: dict, path: Path) -> list[Path]:
    """Write the summary plot at ``path`` and its siblings; returns the paths written."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    written = []
    if result.get("modes"):
        written += [plot_summary(result, path), plot_tpf(result, sibling(path, "tpf"))]
    if result.get("canvas_example"):
        written.append(plot_canvas(result["canvas_example"], sibling(path, "canvas")))
    return written


def plot_extract(summary: dict[str, dict[str, Any]], path: Path) -> None:
    """The extraction benchmark: field accuracy, item exact rate and numeric-copy accuracy per row (left), latency
    p50/p95 per row (right)."""
    rows = list(summary)
    fig, (a, b) = plt.subplots(1, 2, figsize=(max(8, 1.6 * len(rows) + 4), 4.5))
    _bars(a, rows, [(k.replace("_", " "), [summary[r][k] for r in rows])
                    for k in ("field_accuracy", "item_exact", "numeric_copy")], "{:.2f}")
    a.set_ylim(0, 1.1)
    a.set_title("extraction accuracy")
    a.legend(fontsize=7)
    _bars(b, rows, [("p50 ms", [summary[r]["p50_ms"] for r in rows]), ("p95 ms", [summary[r]["p95_ms"] for r in rows])],
          "{:.0f}")
    b.set_title("latency per item (ms)")
    b.legend(fontsize=7)
    for ax in (a, b):
        ax.tick_params(axis="x", labelrotation=30, labelsize=7)
    n = max((s["items"] for s in summary.values()), default=0)
    fig.suptitle(f"extract · SmolLM2-135M · n={n}")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
