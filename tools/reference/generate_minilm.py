#!/usr/bin/env python3
"""Reference embeddings of all-MiniLM-L6-v2 for 16 fixed sentences, from sentence-transformers.

Needs the model folder that tools/fetch_minilm.sh unpacks (default models/all-minilm-l6-v2).
Writes crates/forgia-cli/tests/golden/minilm.json: the sentences, the token ids the Hugging
Face tokenizer gives each one, and the normalized 384-wide embeddings (9 significant digits),
read by the #[ignore] test crates/forgia-cli/tests/minilm.rs (see docs/VERIFICATION.md).

Usage:  /work/.venv-torch/bin/python tools/reference/generate_minilm.py [--model DIR] [--out FILE]
"""
import argparse
import json
import os

import torch
from sentence_transformers import SentenceTransformer

from golden_common import REPO, flat9
SENTENCES = [
    "The cat sits outside.",
    "A man is playing guitar.",
    "I love pasta.",
    "The new movie is awesome!",
    "The cat plays in the garden.",
    "A woman watches TV.",
    "The new movie is so great.",
    "Do you like pizza?",
    "forgia computes gradients on the CPU.",
    "Sentence embeddings map text to vectors.",
    "It rained all day in Zürich, so we stayed inside and read books.",
    "Tokenization splits words like unbelievably into pieces.",
    "1234 + 5678 = 6912",
    "Hello, world!",
    "A very long sentence that keeps going, with commas, clauses and many more words than the "
    "others, so that padding and the attention mask matter for every shorter sentence here.",
    "ok",
]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default=os.path.join(REPO, "models", "all-minilm-l6-v2"))
    ap.add_argument("--out", default=os.path.join(REPO, "crates", "forgia-cli", "tests", "golden", "minilm.json"))
    args = ap.parse_args()
    torch.manual_seed(0)
    model = SentenceTransformer(args.model, device="cpu")
    model.eval()
    with torch.no_grad():
        emb = model.encode(SENTENCES, batch_size=len(SENTENCES), convert_to_tensor=True,
                           normalize_embeddings=False).double()
    tok = model.tokenizer
    ids = [tok(s)["input_ids"] for s in SENTENCES]
    out = {
        "sentences": SENTENCES,
        "input_ids": ids,
        "embeddings": [flat9(row) for row in emb],
    }
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(out, f, separators=(",", ":"))
    print(f"wrote {args.out}: {len(SENTENCES)} sentences, width {emb.shape[1]}")


if __name__ == "__main__":
    main()
