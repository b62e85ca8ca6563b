#!/bin/bash
# adapter v3: self-distilled targets (base model's greedy ar-constrained outputs, spaced JSON style), consistency
# rows, LoRA on block positions only; resumed from the shipped adapter (step 350, 312,906 tokens)
cd "$(dirname "$0")/../.." && . .venv/bin/activate
exec python -m agentkit.training --out out/adapter-v3 --steps 1000 --batch-size 4 --max-prefix 320 --threads 1 \
  --examples 0 --sd-calls 28 --sd-extract 10 --sd-edits 0 --sd-free 4 --sd-consistency-every 4 --sd-held-out 4 \
  --sd-style spaced --lora-prefix false --cpu-bf16 true --consistency-frac 0.3 --lr 0.001 --ckpt-every 2 --snapshot-every 10
