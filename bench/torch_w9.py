#!/usr/bin/env python3
"""PyTorch twin of `forgia bench W9`: a MiniLM-shaped BertModel (6 layers, hidden 384, 12
heads, vocab 30522, random weights, dropout 0, eager attention) forward + backward at batch
32 x sequence 64, loss = mean of the last hidden state; with rank-8 LoRA (alpha 16) on every
query and value layer over a frozen base (lora_ms, the headline), and fully trained (full_ms).
Prints one line in the format of `forgia bench`.

Usage: /work/.venv-torch/bin/python bench/torch_w9.py [--threads N] [--reps R] [--sizes B,S]
Needs torch and transformers (`.venv/bin/pip install torch==2.15.0 transformers`).
"""
import argparse

import torch
import torch.nn.functional as F
from transformers import BertConfig, BertModel

from bench_timing import median_ms


def add_lora(model, rank, alpha):
    for p in model.parameters():
        p.requires_grad_(False)
    for name, mod in model.named_modules():
        if name.endswith(".query") or name.endswith(".value"):
            mod.lora_A = torch.nn.Parameter(torch.randn(rank, mod.in_features) / mod.in_features ** 0.5)
            mod.lora_B = torch.nn.Parameter(torch.zeros(mod.out_features, rank))

            def fwd(x, m=mod):
                return F.linear(x, m.weight, m.bias) + (alpha / rank) * F.linear(F.linear(x, m.lora_A), m.lora_B)
            mod.forward = fwd


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int)
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--sizes", default="32,64")
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    b, s = (int(v) for v in args.sizes.split(","))
    torch.manual_seed(9)
    cfg = BertConfig(hidden_size=384, num_hidden_layers=6, num_attention_heads=12, intermediate_size=1536,
                     hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0, attn_implementation="eager")
    model = BertModel(cfg)
    ids = torch.randint(0, cfg.vocab_size, (b, s))
    mask = torch.ones(b, s, dtype=torch.long)

    def step():
        model(input_ids=ids, attention_mask=mask).last_hidden_state.mean().backward()
        model.zero_grad(set_to_none=True)

    full_ms = median_ms(args.reps, step)
    add_lora(model, 8, 16.0)
    lora_ms = median_ms(args.reps, step)
    print(f"name=W9 impl=torch median_ms={lora_ms:.3f} extra=lora_ms={lora_ms:.3f},full_ms={full_ms:.3f},batch={b},seq={s}")


if __name__ == "__main__":
    main()
