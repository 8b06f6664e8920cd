#!/usr/bin/env python3
"""Golden fixture for attention's newer options, RoPE at offsets / position ids, and the
masked softmax, computed with PyTorch on CPU in float64.

Writes crates/forgia/tests/golden/attention.json, read by crates/forgia/tests/attention_next.rs.
The Rust tests only read the committed JSON; PyTorch is never needed to run them.

Ops (the case's `op`), all in PyTorch semantics:

* `sdpa`: F.scaled_dot_product_attention(q, k, v, attn_mask, is_causal, scale, enable_gqa).
  Grouped-query cases use `enable_gqa=True` (k, v with fewer heads). Boolean masks, key
  masks ([B, Sk] -> [B, 1, 1, Sk]) and sliding windows are passed to torch as boolean
  `attn_mask` (True = may attend, the same sense as forgia's nonzero); ALiBi as an explicit
  float bias -slope_h * |i - j|. `attrs` say which forgia option each extra input feeds
  (`extras`: names, in the order of `inputs[3:]`; boolean masks are stored as 0.0/1.0 floats
  and have `null` grads). `query_offset` (a KV-cache step) is torch's lower-right causal
  alignment, written as an explicit boolean mask.
* `sdpa_sinks`: attention with one sink logit per head joining each row's softmax,
  written out explicitly: softmax(cat(S, sink), -1)[..., :Sk] @ v (gpt-oss).
* `masked_softmax`: softmax(scale * x + mask) with bool_mask False entries at -inf, and a line
  masked out entirely giving zeros.
* `rope`: Hugging Face's rotate_half RoPE (or the interleaved pairs when `interleaved`) at
  positions `offset + arange(S)` or `offset + position_ids` ([S] or [B, S]); the ids are in
  `attrs.positions`.

Inputs are float32 values (shortest round-trip decimals); outputs and gradients are float64
results rounded to 9 significant digits. Deterministic (fixed seed).

Usage:  /work/.venv-torch/bin/python tools/reference/generate_attention.py [--out FILE]
"""
import functools
import json
import math
import os

import numpy as np
import torch
import torch.nn.functional as F

from golden_common import GOLDEN, enc9, enc_f32, enc_ints, out_arg, sample_f32, write

SEED = 20261201
DEFAULT_OUT = os.path.join(GOLDEN, "attention.json")

rng = np.random.default_rng(SEED)
f32 = functools.partial(sample_f32, rng)


def alibi_slopes(heads):
    def pow2(n):
        return [2.0 ** (-8.0 * h / n) for h in range(1, n + 1)]

    n = 1 << (heads.bit_length() - 1)
    return pow2(n) + pow2(2 * n)[::2][: heads - n]


def case(name, op, attrs, inputs, diff, fn):
    """Runs fn on inputs (diff[i]: whether input i gets a gradient) with a random cotangent."""
    xs = [x.clone().requires_grad_(d) for x, d in zip(inputs, diff)]
    y = fn(*xs)
    cot = f32(tuple(y.shape))
    (y * cot).sum().backward()
    grads = [enc9(x.grad) if d else None for x, d in zip(xs, diff)]
    return {"name": name, "op": op, "attrs": attrs, "inputs": [enc_f32(x) for x in inputs],
            "cotangent": enc_f32(cot), "output": enc9(y), "grads": grads}


def window_mask(sq, sk, w, causal, offset=0):
    i = torch.arange(sq)[:, None] + offset
    j = torch.arange(sk)[None, :]
    ok = (i - j) < w
    ok &= (j <= i) if causal else ((j - i) < w)
    return ok


def sdpa_cases():
    out = []
    B, HQ, HKV, SQ, SK, D, DV = 2, 4, 2, 3, 5, 4, 3
    q, k, v = f32((B, HQ, SQ, D)), f32((B, HKV, SK, D)), f32((B, HKV, SK, DV))
    for causal in [False, True]:
        out.append(case(f"gqa_causal_{causal}".lower(), "sdpa",
                        {"causal": causal, "scale": 0.6, "enable_gqa": True, "extras": []},
                        [q, k, v], [True] * 3,
                        lambda q, k, v, c=causal: F.scaled_dot_product_attention(
                            q, k, v, is_causal=c, scale=0.6, enable_gqa=True)))
    # Multi-query (one key/value head) with an additive mask that gets a gradient.
    k1, v1, add = f32((B, 1, SK, D)), f32((B, 1, SK, DV)), f32((SQ, SK))
    out.append(case("mqa_additive_mask", "sdpa",
                    {"causal": False, "scale": None, "enable_gqa": True, "extras": ["mask"]},
                    [q, k1, v1, add], [True] * 4,
                    lambda q, k, v, m: F.scaled_dot_product_attention(q, k, v, attn_mask=m, enable_gqa=True)))
    # A boolean mask [B, 1, Sq, Sk] (every query keeps at least one key).
    bm = torch.tensor(rng.random((B, 1, SQ, SK)) < 0.6)
    bm[..., 0] = True
    out.append(case("gqa_bool_mask", "sdpa",
                    {"causal": False, "scale": None, "enable_gqa": True, "extras": ["bool_mask"]},
                    [q, k, v, bm.double()], [True, True, True, False],
                    lambda q, k, v, m: F.scaled_dot_product_attention(q, k, v, attn_mask=m > 0, enable_gqa=True)))
    # A key-padding mask [B, Sk]: batch 1 has its last two keys padded.
    km = torch.ones(B, SK, dtype=torch.float64)
    km[1, 3:] = 0
    qm, km_k, km_v = f32((B, HQ, SQ, D)), f32((B, HQ, SK, D)), f32((B, HQ, SK, DV))
    out.append(case("key_mask", "sdpa",
                    {"causal": False, "scale": None, "enable_gqa": False, "extras": ["key_mask"]},
                    [qm, km_k, km_v, km], [True, True, True, False],
                    lambda q, k, v, m: F.scaled_dot_product_attention(q, k, v, attn_mask=(m > 0)[:, None, None, :])))
    # Sliding windows (an explicit boolean mask in torch).
    S = 6
    qs, ks, vs = f32((1, 2, S, D)), f32((1, 2, S, D)), f32((1, 2, S, DV))
    for causal in [True, False]:
        w = 2 if causal else 3
        m = window_mask(S, S, w, causal)
        out.append(case(f"window_{w}_causal_{causal}".lower(), "sdpa",
                        {"causal": causal, "scale": None, "enable_gqa": False, "window": w, "extras": []},
                        [qs, ks, vs], [True] * 3,
                        lambda q, k, v, m=m: F.scaled_dot_product_attention(q, k, v, attn_mask=m)))
    # A KV-cache step: 2 new queries at positions 4, 5 over 6 keys (query_offset 4), causal
    # with a window of 3 (torch: an explicit lower-right boolean mask), grouped.
    qo = f32((1, HQ, 2, D))
    ko, vo = f32((1, HKV, S, D)), f32((1, HKV, S, DV))
    mo = window_mask(2, S, 3, True, offset=4)
    out.append(case("kv_cache_step_window_gqa", "sdpa",
                    {"causal": True, "scale": None, "enable_gqa": True, "window": 3, "query_offset": 4,
                     "extras": []},
                    [qo, ko, vo], [True] * 3,
                    lambda q, k, v: F.scaled_dot_product_attention(q, k, v, attn_mask=mo, enable_gqa=True)))
    # ALiBi (an explicit float bias), causal, grouped.
    slopes = alibi_slopes(HQ)
    i, j = torch.arange(S)[:, None], torch.arange(S)[None, :]
    bias = -torch.tensor(slopes, dtype=torch.float64)[:, None, None] * (i - j).abs().double()
    bias = bias.masked_fill(j > i, float("-inf"))
    qa, ka, va = f32((1, HQ, S, D)), f32((1, HKV, S, D)), f32((1, HKV, S, DV))
    out.append(case("alibi_gqa_causal", "sdpa",
                    {"causal": True, "scale": None, "enable_gqa": True, "alibi": True, "extras": []},
                    [qa, ka, va], [True] * 3,
                    lambda q, k, v: F.scaled_dot_product_attention(q, k, v, attn_mask=bias, enable_gqa=True)))
    return out


def sinks_cases():
    B, H, SQ, SK, D, DV = 2, 2, 3, 4, 4, 3
    q, k, v, s = f32((B, H, SQ, D)), f32((B, H, SK, D)), f32((B, H, SK, DV)), f32((H,))

    def attn(q, k, v, sink, causal):
        sc = q @ k.transpose(-1, -2) / math.sqrt(D)
        if causal:
            sc = sc.masked_fill(torch.ones(SQ, SK, dtype=torch.bool).triu(1), float("-inf"))
        col = sink.reshape(1, H, 1, 1).expand(B, H, SQ, 1)
        p = torch.softmax(torch.cat([sc, col], -1), -1)[..., :SK]
        return p @ v

    return [case(f"sinks_causal_{c}".lower(), "sdpa_sinks", {"causal": c}, [q, k, v, s], [True] * 4,
                 lambda q, k, v, s, c=c: attn(q, k, v, s, c)) for c in [False, True]]


def masked_softmax_cases():
    x, m = f32((3, 5)), f32((5,))
    keep = torch.tensor(rng.random((3, 5)) < 0.7)
    keep[0, :] = True
    keep[2, :] = False  # a line masked out entirely: zeros

    def f(x, m, keep):
        z = (x * 0.5 + m).masked_fill(keep == 0, float("-inf"))
        dead = (keep == 0).all(-1, keepdim=True)
        return torch.where(dead, torch.zeros_like(z), torch.softmax(z.masked_fill(dead, 0.0), -1))

    return [case("masked_softmax_scale_mask_bool", "masked_softmax", {"axis": -1, "scale": 0.5},
                 [x, m, keep.double()], [True, True, False], f)]


def rope_ref(x, base, pos, interleaved):
    """x [B, H, S, D]; pos [S] or [B, S] (float64 positions)."""
    D = x.shape[-1]
    inv = base ** (-torch.arange(0, D, 2, dtype=torch.float64) / D)
    ang = pos[..., None] * inv  # [S, D/2] or [B, S, D/2]
    if ang.dim() == 3:
        ang = ang[:, None]
    c, s = ang.cos(), ang.sin()
    if interleaved:
        a, b = x[..., 0::2], x[..., 1::2]
        return torch.stack([a * c - b * s, b * c + a * s], -1).flatten(-2)
    c, s = torch.cat([c, c], -1), torch.cat([s, s], -1)
    h = D // 2
    rot = torch.cat([-x[..., h:], x[..., :h]], -1)
    return x * c + rot * s


def rope_cases():
    out = []
    B, H, S, D = 2, 2, 4, 6
    x = f32((B, H, S, D))
    for name, offset, ids, inter in [
        ("rope_offset_7", 7, None, False),
        ("rope_offset_3_interleaved", 3, None, True),
        ("rope_ids_shared", 0, [[5, 0, 2, 9]], False),
        ("rope_ids_per_batch_offset_2", 2, [[0, 1, 2, 0], [3, 4, 0, 1]], False),
        ("rope_ids_per_batch_interleaved", 0, [[0, 1, 2, 0], [3, 4, 0, 1]], True),
    ]:
        if ids is None:
            pos = torch.arange(S, dtype=torch.float64) + offset
            positions = None
        else:
            t = torch.tensor(ids, dtype=torch.float64)
            t = t[0] if len(ids) == 1 else t
            pos = t + offset
            positions = enc_ints(t)
        attrs = {"base": 100.0, "offset": offset, "positions": positions, "interleaved": inter}
        out.append(case(name, "rope", attrs, [x], [True],
                        lambda x, pos=pos, inter=inter: rope_ref(x, 100.0, pos, inter)))
    return out


def main():
    out = out_arg(DEFAULT_OUT)
    torch.set_default_dtype(torch.float64)
    cases = sdpa_cases() + sinks_cases() + masked_softmax_cases() + rope_cases()
    text = json.dumps({"generator": f"torch {torch.__version__}", "seed": SEED, "cases": cases})
    write(out, text, 200_000, f"{len(cases)} cases")


if __name__ == "__main__":
    main()
