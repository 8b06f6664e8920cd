#!/usr/bin/env python3
"""Golden fixture for tied weights: a tiny language model whose token embedding is also its
output projection (as GPT-2 ties `wte` and `lm_head`), trained for 5 AdamW steps in PyTorch.

Writes crates/forgia/tests/golden/tied.json, read by crates/forgia/tests/tied_weights.rs.
The Rust tests only read the committed JSON; PyTorch is never needed to run them.

Model (all computation in float64):

    x      = E[tokens]                    E: [V, D], the tied parameter
    h      = layer_norm(tanh(x @ W.T + b)) W: [D, D], b: [D]; LayerNorm(D, eps=1e-5) with
                                            learned weight and bias
    logits = h @ E.T                      the same E (F.linear without bias)
    loss   = cross_entropy(logits.reshape(B*T, V), targets.reshape(B*T))   (mean)

The tie is one `nn.Parameter` object used twice (`lm_head.weight = wte.weight`), so
`named_parameters()` lists it once (under `wte.weight`) and AdamW updates it once per step from
the sum of the embedding's and the output projection's gradients.

For contrast the same model is trained UNTIED (E copied into two separate parameters) from the
same start; its loss curve must differ from the tied one, so the test proves the tie matters.

Initial values are drawn with numpy's `default_rng(SEED)` and rounded to float32, so reading
them as f32 gives exactly the starting point. Outputs are written to 9 significant digits.

The script checks its own fixture: the step-1 gradient of E equals the sum of the two untied
gradients; no nonzero gradient element is small enough for AdamW's eps or float32 noise to
matter; and the same training run in float32 stays within 1e-5 (mixed tolerance) of the
float64 result, a tenth of the Rust test's 1e-4, so the comparison is well-conditioned.

Usage:  /work/.venv-torch/bin/python tools/reference/generate_tied.py [--out FILE]
"""
import os

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from golden_common import GOLDEN, as_f32, dump_lines, enc9, enc_f32, enc_ints, out_arg, write

SEED = 20240613
V, D, B, T = 11, 6, 3, 4
STEPS = 5
LN_EPS = 1e-5
ADAMW = dict(lr=0.05, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01)

DEFAULT_OUT = os.path.join(GOLDEN, "tied.json")


class TinyLm(nn.Module):
    def __init__(self, init, tied, dtype):
        super().__init__()
        self.wte = nn.Embedding(V, D, dtype=dtype)
        self.fc = nn.Linear(D, D, bias=True, dtype=dtype)
        self.ln = nn.LayerNorm(D, eps=LN_EPS, dtype=dtype)
        self.lm_head = nn.Linear(D, V, bias=False, dtype=dtype)
        if tied:
            self.lm_head.weight = self.wte.weight  # one Parameter object, used twice
        with torch.no_grad():
            self.wte.weight.copy_(torch.tensor(init["wte.weight"], dtype=dtype))
            self.fc.weight.copy_(torch.tensor(init["fc.weight"], dtype=dtype))
            self.fc.bias.copy_(torch.tensor(init["fc.bias"], dtype=dtype))
            self.ln.weight.copy_(torch.tensor(init["ln.weight"], dtype=dtype))
            self.ln.bias.copy_(torch.tensor(init["ln.bias"], dtype=dtype))
            if not tied:
                self.lm_head.weight.copy_(torch.tensor(init["wte.weight"], dtype=dtype))

    def loss(self, tokens, targets):
        x = self.wte(tokens)
        h = self.ln(torch.tanh(self.fc(x)))
        logits = self.lm_head(h)
        return F.cross_entropy(logits.reshape(B * T, V), targets.reshape(B * T))


def train(init, tokens, targets, tied, dtype):
    """5 AdamW steps; the loss before each update, the gradients at step 1 (by parameter name),
    every gradient seen, and the parameters after the last update."""
    model = TinyLm(init, tied, dtype)
    opt = torch.optim.AdamW(model.parameters(), foreach=False, **ADAMW)
    losses, grads1, all_grads = [], {}, []
    for step in range(STEPS):
        opt.zero_grad()
        loss = model.loss(tokens, targets)
        loss.backward()
        losses.append(loss.item())
        named = dict(model.named_parameters(remove_duplicate=False))
        if step == 0:
            grads1 = {n: p.grad.detach().double().numpy().copy() for n, p in named.items()}
        all_grads += [p.grad.detach().double().numpy().copy() for p in model.parameters()]
        opt.step()
    final = {n: p.detach().double().numpy().copy() for n, p in model.named_parameters(remove_duplicate=False)}
    return model, losses, grads1, all_grads, final


def mixed_dev(a, e):
    a, e = np.asarray(a, dtype=np.float64), np.asarray(e, dtype=np.float64)
    return float(np.max(np.abs(a - e) / (1.0 + np.abs(e))))


def main():
    path = out_arg(DEFAULT_OUT)
    torch.manual_seed(SEED)  # nothing is drawn from torch; set for good measure
    rng = np.random.default_rng(SEED)
    bound = 1.0 / np.sqrt(D)
    init = {
        "wte.weight": as_f32(rng.standard_normal((V, D)) * 0.5),
        "fc.weight": as_f32(rng.uniform(-bound, bound, (D, D)) * 2.0),
        "fc.bias": as_f32(rng.uniform(-bound, bound, (D,))),
        "ln.weight": as_f32(1.0 + 0.2 * rng.standard_normal((D,))),
        "ln.bias": as_f32(0.2 * rng.standard_normal((D,))),
    }
    tokens_np = rng.integers(0, V, (B, T))
    targets_np = rng.integers(0, V, (B, T))
    tokens, targets = torch.tensor(tokens_np), torch.tensor(targets_np)

    model, losses, g1, grads, final = train(init, tokens, targets, True, torch.float64)
    names = [n for n, _ in model.named_parameters()]
    state_dict_keys = list(model.state_dict().keys())
    assert names == ["wte.weight", "fc.weight", "fc.bias", "ln.weight", "ln.bias"], names
    assert "lm_head.weight" in state_dict_keys
    assert final["lm_head.weight"] is not None and np.array_equal(final["lm_head.weight"], final["wte.weight"])
    grad_e = g1["wte.weight"]

    _, untied_losses, ug1, _, untied_final = train(init, tokens, targets, False, torch.float64)
    emb_part, out_part = ug1["wte.weight"], ug1["lm_head.weight"]
    # The tied gradient is the sum of the embedding's and the output projection's.
    assert np.allclose(grad_e, emb_part + out_part, rtol=0, atol=1e-12), np.abs(grad_e - emb_part - out_part).max()
    assert abs(losses[0] - untied_losses[0]) < 1e-12  # same start
    tie_gap = [abs(a - b) for a, b in zip(losses, untied_losses)]
    assert min(tie_gap[1:]) > 1e-2, tie_gap  # the tie matters from the first update on

    # Conditioning: nonzero gradient elements are far from AdamW's eps and float32 noise.
    nonzero = np.concatenate([np.abs(g[g != 0.0]) for g in grads])
    smallest_grad = float(nonzero.min())
    assert smallest_grad > 1e-4, smallest_grad
    _, l32, g32, _, f32final = train(init, tokens, targets, True, torch.float32)
    f32_dev = max(
        mixed_dev(l32, losses),
        mixed_dev(g32["wte.weight"], grad_e),
        max(mixed_dev(f32final[n], final[n]) for n in names),
    )
    assert f32_dev < 1e-5, f32_dev

    out = {
        "generator": f"torch {torch.__version__}",
        "script": "tools/reference/generate_tied.py",
        "seed": SEED,
        "config": {
            "vocab": V, "dim": D, "batch": B, "seq": T, "steps": STEPS, "layer_norm_eps": LN_EPS,
            "optimizer": "adamw", "lr": ADAMW["lr"], "betas": list(ADAMW["betas"]),
            "eps": ADAMW["eps"], "weight_decay": ADAMW["weight_decay"],
        },
        "model": "x = wte[tokens]; h = ln(tanh(fc(x))); logits = h @ wte.T; "
                 "loss = mean cross_entropy(logits [B*T, V], targets [B*T])",
        "tied_name": "lm_head.weight",
        "named_parameters": names,
        "state_dict_keys": state_dict_keys,
        "tokens": enc_ints(tokens_np),
        "targets": enc_ints(targets_np),
        "init": [{"name": n, **enc_f32(init[n])} for n in names],
        "losses": [float(f"{v:.9g}") for v in losses],
        "grad_wte_step1": enc9(grad_e),
        "grad_wte_step1_embedding_part": enc9(emb_part),
        "grad_wte_step1_output_part": enc9(out_part),
        "final": [{"name": n, **enc9(final[n])} for n in names],
        "untied_losses": [float(f"{v:.9g}") for v in untied_losses],
        "untied_final": [{"name": n, **enc9(untied_final[n])} for n in names + ["lm_head.weight"]],
        "checks": {
            "smallest_nonzero_grad": float(f"{smallest_grad:.3g}"),
            "float32_run_max_mixed_deviation": float(f"{f32_dev:.3g}"),
            "tied_vs_untied_loss_gap": [float(f"{v:.3g}") for v in tie_gap],
        },
    }
    write(path, dump_lines(out), 50_000)
    print("tied losses  ", out["losses"])
    print("untied losses", out["untied_losses"])
    print("checks", out["checks"])


if __name__ == "__main__":
    main()
