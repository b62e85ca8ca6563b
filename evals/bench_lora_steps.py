"""What a merged LoRA costs a one-position step, and how close each way of running it stays to its float32 weights.

    python evals/bench_lora_steps.py --lora adapters/smollm2-135m-loop --out evals/results/adapters/bench_lora_steps_q8.json

Engines on the default model, 1 thread: the base weights (short passes on the checkpoint's 4-bit weights), the LoRA
merged with its short passes on 4-bit grids fitted to the merged weights (GPTQ, ``agentkit/models/gptq.py``: the
engine's way), on an 8-bit copy (``q4_steps="int8"``), dense (``q4_steps="off"``), and rounded onto a fresh 4-bit
grid (``Q4Linear`` over them: not an engine option, measured to show why). Per engine: ms per one-position forward
after a 300-token prompt (median of ``--rounds`` rounds of ``--reps``); over 24 positions of a random sequence, the
mean |logit - float32 merged logit| and how often the argmax agrees with the float32 merged model's; and on
``--heldout`` agent-loop steps the adapter never saw (``loop_traces`` seed 2; it trained on seed 0, the grids were
fitted on seed 1), the target tokens' cross entropy and argmax agreement, each target token read from a
one-position step (the short passes AR decoding runs).
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

import torch

from agentkit.config import NO_LORA, EngineConfig
from agentkit.engine.engine import Engine
from agentkit.evals.report import environment, write_json_atomic
from agentkit.models.q4 import GROUP, Q4Linear, Q8Linear


def step_ms(model: torch.nn.Module, reps: int) -> float:
    ids = torch.randint(0, 1000, (1, 300), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        cache = model(ids, use_cache=True).past_key_values
        tok = torch.tensor([[5]])
        for _ in range(20):
            model(tok, past_key_values=cache, use_cache=True)
        t = time.perf_counter()
        for _ in range(reps):
            model(tok, past_key_values=cache, use_cache=True)
        return (time.perf_counter() - t) / reps * 1000


def logits(model: torch.nn.Module) -> torch.Tensor:
    ids = torch.randint(0, 1000, (1, 64), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        cache = model(ids[:, :40], use_cache=True).past_key_values
        return torch.stack([model(ids[:, i:i + 1], past_key_values=cache, use_cache=True).logits[0, -1].float()
                            for i in range(40, 64)])


def heldout_rows(tokenizer, n: int) -> list[tuple[list[int], int]]:
    """(ids, first target position) of the last step of ``n`` agent-loop tasks from ``loop_traces`` seed 2."""
    from agentkit.training.loop_traces import generate
    from agentkit.training.sft import tokenize

    last = {}
    for ex in generate(n, seed=2):
        last[ex.task] = ex
    eos = tokenizer.convert_tokens_to_ids("<|im_end|>")
    return [(r.ids, r.start) for r in (tokenize(vars(ex), tokenizer, eos) for ex in last.values())]


def target_loss(model: torch.nn.Module, rows: list[tuple[list[int], int]]) -> tuple[float, float]:
    """Mean cross entropy and argmax agreement of the target tokens, each from a one-position step."""
    loss, agree, n = 0.0, 0, 0
    with torch.no_grad():
        for ids, start in rows:
            cache = model(torch.tensor([ids[:start - 1]]), use_cache=True).past_key_values
            for i in range(start - 1, len(ids) - 1):
                logit = model(torch.tensor([[ids[i]]]), past_key_values=cache, use_cache=True).logits[0, -1].float()
                loss += torch.nn.functional.cross_entropy(logit[None], torch.tensor([ids[i + 1]])).item()
                agree += int(logit.argmax()) == ids[i + 1]
                n += 1
    return loss / n, agree / n


def requantized(model: torch.nn.Module, merged32: dict[str, torch.Tensor]) -> int:
    """Each 8-bit layer replaced by a 4-bit one over a fresh grid of the merged float32 weights."""
    n_swapped = 0
    for name, mod in list(model.named_modules()):
        if not isinstance(mod, Q8Linear):
            continue
        w = merged32[name]
        n, k = w.shape
        g = w.view(n, k // GROUP, GROUP)
        m = g.min(-1).values
        d = (g.max(-1).values - m) / 15
        q = ((g - m[..., None]) / torch.where(d == 0, 1.0, d)[..., None]).round().clamp(0, 15)
        new = Q4Linear(torch.nn.Linear(k, n, bias=False), q.view(n, k).to(torch.int32), d, m)
        new.weight, new.packed_dense = mod.weight, mod.packed_dense
        parent, _, attr = name.rpartition(".")
        setattr(model.get_submodule(parent), attr, new)
        n_swapped += 1
    return n_swapped


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--lora", required=True)
    ap.add_argument("--reps", type=int, default=300)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--heldout", type=int, default=40, help="agent-loop tasks for the target loss (0: none)")
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    torch.set_num_threads(1)
    ref = Engine(EngineConfig(lora=a.lora, dtype="float32", threads=1)).lm.model
    want = logits(ref)
    merged32 = {n: m.weight.detach().clone() for n, m in ref.named_modules()
                if ".layers." in n and isinstance(m, torch.nn.Linear)}
    del ref
    models = {"base (4-bit short passes)": Engine(EngineConfig(lora=NO_LORA, threads=1)).lm.model,
              "LoRA, fitted 4-bit grids (the engine's)": Engine(EngineConfig(lora=a.lora, threads=1)).lm.model,
              "LoRA, 8-bit copy (q4_steps=int8)": Engine(EngineConfig(lora=a.lora, q4_steps="int8", threads=1)).lm.model,
              "LoRA, dense": Engine(EngineConfig(lora=a.lora, q4_steps="off", threads=1)).lm.model}
    fresh = Engine(EngineConfig(lora=a.lora, q4_steps="int8", threads=1))
    requantized(fresh.lm.model, merged32)
    models["LoRA, rounded onto a fresh 4-bit grid (not offered)"] = fresh.lm.model
    heldout = heldout_rows(fresh.tokenizer, a.heldout) if a.heldout else []
    rows = {}
    for name, model in models.items():
        got = logits(model)
        rows[name] = {"logit_error_mean": round((got - want).abs().mean().item(), 4),
                      "argmax_agrees": round((got.argmax(-1) == want.argmax(-1)).float().mean().item(), 3),
                      "step_ms": []}
        if heldout:
            loss, agree = target_loss(model, heldout)
            rows[name].update(heldout_target_loss=round(loss, 4), heldout_target_argmax=round(agree, 4))
    for _ in range(a.rounds):  # interleaved, so drift on a shared machine spreads over all of them
        for name, model in models.items():
            rows[name]["step_ms"].append(round(step_ms(model, a.reps), 2))
    base = statistics.median(rows["base (4-bit short passes)"]["step_ms"])
    for name, r in rows.items():
        r["step_ms_median"] = statistics.median(r["step_ms"])
        r["vs_base"] = round(r["step_ms_median"] / base, 3)
        print(f"{name}: {r['step_ms_median']:.2f} ms ({r['vs_base']:.2f}x), logit error {r['logit_error_mean']}, "
              f"argmax agrees {r['argmax_agrees']}, held-out target loss {r.get('heldout_target_loss')} "
              f"(argmax {r.get('heldout_target_argmax')})")
    write_json_atomic(Path(a.out), {"lora": a.lora, "heldout_tasks": a.heldout, "heldout_targets": sum(
        len(ids) - start for ids, start in heldout), "rows": rows, "env": environment(
        f"python evals/bench_lora_steps.py --lora {a.lora} --out {a.out}")})


if __name__ == "__main__":
    main()
