"""Training step time and loss, fp32 against bf16 autocast, on this machine's CPU (or ``--device cuda``).

Same model, same LoRA initialisation, same batches (synthetic rows of the training recipe): ``--steps`` optimizer
steps in each precision, alternating (a loaded machine slows both alike), after one warm-up step that is not timed. Prints the median step time, tokens/s and the
losses side by side; the ratio is what decides ``TrainConfig.cpu_bf16``. Asserts nothing.

    python evals/bench_train_bf16.py --steps 6 --batch-size 4 --threads 1
"""

from __future__ import annotations

import argparse
import random
import statistics
import time

import torch

from agentkit.models.loader import load_model
from agentkit.training.data import synthetic, tokenize
from agentkit.training.recipe import TrainConfig, Trainer, make_batch


def trainer(bf16: bool, a) -> tuple[Trainer, list]:
    torch.manual_seed(0)  # the same LoRA initialisation in both precisions
    lm = load_model(None, dtype="float32")
    cfg = TrainConfig(steps=1000, batch_size=a.batch_size, max_prefix=320, bf16=bf16, cpu_bf16=bf16,
                      device=a.device, log_every=0)
    tr = Trainer(lm, cfg)
    exs = [tokenize(e, lm.tokenizer, lm.eos_ids[0], lm.chat) for e in synthetic(64, seed=0, max_distractors=1)]
    return tr, exs


def run(a) -> dict[str, tuple[list[float], list[float], int]]:
    """Steps alternate between the two precisions (same batch each time), so load on a shared machine hits both."""
    trs = {"fp32": trainer(False, a), "bf16 autocast": trainer(True, a)}
    out: dict[str, tuple[list[float], list[float], int]] = {k: ([], [], 0) for k in trs}
    for k in range(a.steps + 1):
        for name, (tr, exs) in trs.items():
            r = random.Random(k)
            pad = tr.lm.tokenizer.pad_token_id if tr.lm.tokenizer.pad_token_id is not None else tr.lm.eos_ids[0]
            batch = make_batch([r.choice(exs) for _ in range(tr.cfg.batch_size)], tr.cfg, tr.mask_id,
                               tr.acfg.vocab_size, pad, r)
            if tr.device.type == "cuda":
                torch.cuda.synchronize()
            t0 = time.perf_counter()
            loss = tr.step(batch)
            if tr.device.type == "cuda":
                torch.cuda.synchronize()
            times, losses, tokens = out[name]
            if k:  # the first step warms up kernels and allocations
                times.append(time.perf_counter() - t0)
                tokens += batch.tokens
            losses.append(loss)
            out[name] = (times, losses, tokens)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--batch-size", type=int, default=4)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--threads", type=int, default=None)
    a = ap.parse_args()
    if a.threads:
        torch.set_num_threads(a.threads)
    res = run(a)
    print(f"{a.steps} steps, batch {a.batch_size}, device {a.device}, torch threads {torch.get_num_threads()}\n")
    print(f"{'precision':<14} {'median s/step':>13} {'tokens/s':>9}  losses")
    for name, (times, losses, tokens) in res.items():
        print(f"{name:<14} {statistics.median(times):>13.2f} {tokens / sum(times):>9.0f}  "
              + " ".join(f"{x:.3f}" for x in losses))
    f, b = res["fp32"], res["bf16 autocast"]
    print(f"\nbf16 / fp32 step time: {statistics.median(b[0]) / statistics.median(f[0]):.2f}x; "
          f"mean loss fp32 {statistics.mean(f[1]):.3f}, bf16 {statistics.mean(b[1]):.3f}")


if __name__ == "__main__":
    main()
