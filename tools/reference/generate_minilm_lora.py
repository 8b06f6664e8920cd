#!/usr/bin/env python3
"""One LoRA training step of all-MiniLM-L6-v2 in PyTorch: the reference for the #[ignore]
test crates/forgia/tests/minilm_lora.rs (see docs/VERIFICATION.md).

Rank-2 adapters (alpha 4) on every query and value layer, A and B drawn from a seeded
generator (B nonzero so every adapter gets a gradient), the base frozen. The batch is 8
(misspelled, correct) word pairs; the loss is the in-batch contrastive loss of
sentence-transformers' MultipleNegativesRankingLoss: cross-entropy of 20 x cos(a_i, b_j)
against the diagonal. Computed in float64 from the f32 weights.

Writes crates/forgia/tests/golden/minilm_lora/adapter_model.safetensors (PEFT names) and
crates/forgia/tests/golden/minilm_lora.json: the HF tokenizer's padded ids and masks of both
sides, the loss, and the gradients of two adapters.

Usage:  /work/.venv-torch/bin/python tools/reference/generate_minilm_lora.py [--model DIR]
"""
import argparse
import json
import os

import torch
import torch.nn.functional as F
from safetensors.torch import save_file
from sentence_transformers import SentenceTransformer

from golden_common import GOLDEN, REPO, add_lora, flat9
PAIRS = [("helo", "hello"), ("wrold", "world"), ("recieve", "receive"), ("teh", "the"),
         ("adress", "address"), ("begining", "beginning"), ("calender", "calendar"), ("definately", "definitely")]
RANK, ALPHA = 2, 4.0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default=os.path.join(REPO, "models", "all-minilm-l6-v2"))
    ap.add_argument("--out", default=GOLDEN)
    args = ap.parse_args()
    st = SentenceTransformer(args.model, device="cpu")
    st.eval()
    bert = st[0].auto_model
    for p in st.parameters():
        p.requires_grad_(False)
    gen = torch.Generator().manual_seed(16)
    adapters = add_lora(bert, RANK, ALPHA, gen, 0.1)
    st.double()
    d = os.path.join(args.out, "minilm_lora")
    os.makedirs(d, exist_ok=True)
    save_file(adapters, os.path.join(d, "adapter_model.safetensors"), metadata={"format": "pt"})

    def encode(texts):
        feats = st.tokenize(texts)
        return feats, st(dict(feats))["sentence_embedding"]

    fa, ea = encode([p[0] for p in PAIRS])
    fb, eb = encode([p[1] for p in PAIRS])
    scores = 20.0 * F.normalize(ea, dim=-1) @ F.normalize(eb, dim=-1).T
    loss = F.cross_entropy(scores, torch.arange(len(PAIRS)))
    loss.backward()
    mods = dict(bert.named_modules())
    grads = {
        "encoder.layer.0.attention.self.query.lora_A.weight": mods["encoder.layer.0.attention.self.query"].lora_A.grad,
        "encoder.layer.5.attention.self.value.lora_B.weight": mods["encoder.layer.5.attention.self.value"].lora_B.grad,
    }
    out = {
        "rank": RANK, "alpha": ALPHA, "pairs": PAIRS, "loss": float(loss.detach()),
        "a_ids": fa["input_ids"].tolist(), "a_mask": fa["attention_mask"].tolist(),
        "b_ids": fb["input_ids"].tolist(), "b_mask": fb["attention_mask"].tolist(),
        "grads": {k: flat9(g) for k, g in grads.items()},
    }
    with open(os.path.join(args.out, "minilm_lora.json"), "w") as f:
        json.dump(out, f, separators=(",", ":"))
    print("loss", out["loss"])


if __name__ == "__main__":
    main()
