"""What the PyTorch golden generators (tools/reference/generate_*.py) share: where the goldens
live, the seeded float32 draws, the JSON encoders and the writers.

The generators import it by name (`from golden_common import ...`): Python puts a script's own
folder first on `sys.path`, so `python tools/reference/generate_x.py` finds this module from any
working directory. Nothing here draws a random number by itself; each generator owns its numpy
`default_rng(SEED)` stream and passes it in, so the draws (and the committed goldens) depend only
on the order of the generator's own calls.

Encodings (tools/reference/README.md, "File format"):

* inputs are float32 values written as their shortest float32 round-trip decimals (`enc_f32`),
  so parsing them as f32 gives exactly the values the golden was computed from;
* outputs and gradients are float64 results rounded to 8 or 9 significant digits (`enc`);
* integer tensors (indices, labels, masks) are written as ints (`enc_ints`).
"""
import argparse
import json
import os

import numpy as np
import torch
import torch.nn.functional as F

REPO = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
GOLDEN = os.path.join(REPO, "crates", "forgia", "tests", "golden")


def out_arg(default, description=None):
    """The `--out FILE` command-line option (default: `default`), parsed from sys.argv."""
    ap = argparse.ArgumentParser(description=description)
    ap.add_argument("--out", default=default)
    return ap.parse_args().out


def as_f32(a):
    """A float64 numpy array holding `a` rounded to float32."""
    return np.asarray(a, dtype=np.float32).astype(np.float64)


def sample_f32(rng, shape, scale=1.0):
    """`scale` times standard normal draws from `rng`, rounded to float32, as a float64 tensor."""
    return torch.tensor(as_f32(rng.standard_normal(shape) * scale), dtype=torch.float64)


def sample_6g(rng, shape, scale=1.0):
    """`scale` times standard normal draws from `rng`, rounded to 6 significant digits and then
    to float32, as a float64 tensor."""
    a = rng.standard_normal(shape) * scale
    a = np.array([float(f"{v:.6g}") for v in a.reshape(-1)], dtype=np.float32).reshape(shape)
    return torch.tensor(a.astype(np.float64))


def _numpy(t):
    return t.detach().numpy() if torch.is_tensor(t) else np.asarray(t)


def enc_f32(t):
    """A float32-valued tensor or array as `{"shape", "data"}` with each value's shortest float32
    round-trip decimal (parsing it as f64 and rounding to f32, as the Rust loader does, is exact)."""
    a = _numpy(t)
    flat = a.reshape(-1)
    vals = [float(str(np.float32(v))) for v in flat]
    assert all(np.float32(np.float64(v)) == np.float32(x) for v, x in zip(vals, flat))
    return {"shape": list(a.shape), "data": vals}


def enc(t, digits):
    """A tensor or array as `{"shape", "data"}`, in float64 rounded to `digits` significant
    digits."""
    a = np.asarray(t.detach().double().numpy() if torch.is_tensor(t) else t, dtype=np.float64)
    return {"shape": list(a.shape), "data": [float(f"{v:.{digits}g}") for v in a.reshape(-1)]}


def enc8(t):
    """`enc` to 8 significant digits (the op goldens' outputs and gradients)."""
    return enc(t, 8)


def enc9(t):
    """`enc` to 9 significant digits."""
    return enc(t, 9)


def flat9(t):
    """A tensor's values in float64 as a flat list, rounded to 9 significant digits."""
    return enc9(t)["data"]


def enc_ints(t):
    """An integer tensor, array or nested list as `{"shape", "data": [ints]}`."""
    a = _numpy(t)
    return {"shape": list(a.shape), "data": [int(v) for v in a.reshape(-1)]}


def cases_text(seed, cases):
    """The family format of the op goldens: `{"generator", "seed", "cases"}` with one compact
    case per line."""
    body = ",\n ".join(json.dumps(c, separators=(",", ":"), allow_nan=False) for c in cases)
    return f'{{"generator": "torch {torch.__version__}", "seed": {seed}, "cases": [\n {body}\n]}}'


def dump_lines(obj):
    """JSON with one top-level key per line and, for a list of objects (cases, named tensors),
    one object per line (diff-friendly, small)."""
    def one(v):
        return json.dumps(v, separators=(",", ":"))

    lines = []
    for k, v in obj.items():
        if isinstance(v, list) and v and isinstance(v[0], dict):
            inner = ",\n  ".join(one(t) for t in v)
            lines.append(f" {json.dumps(k)}: [\n  {inner}\n ]")
        else:
            lines.append(f" {json.dumps(k)}: {one(v)}")
    return "{\n" + ",\n".join(lines) + "\n}"


def write(path, text, limit, what=""):
    """Writes `text` and a final newline to `path`, after checking that it stays under `limit`
    characters (the goldens are committed; keep them small)."""
    assert len(text) < limit, f"{path}: {len(text)} bytes, over {limit}"
    with open(path, "w") as f:
        f.write(text + "\n")
    print(f"wrote {path} ({len(text)} bytes{', ' + what if what else ''})")


def add_lora(model, rank, alpha, gen, scale):
    """Rank-`rank` LoRA adapters on every `.query` and `.value` linear layer of `model`, in
    `named_modules` order: A [rank, in] and B [out, rank] drawn from `gen` as `scale` times
    standard normals (B nonzero so every adapter gets a gradient), rounded to float32 and held
    as float64 parameters `lora_A` / `lora_B`; the layer computes
    `x W^T + b + (alpha / rank) (x A^T) B^T`. Returns the float32 adapters under PEFT's
    adapter_model.safetensors names (`base_model.model.<layer>.lora_A.weight`)."""
    adapters = {}
    for name, mod in model.named_modules():
        if name.endswith(".query") or name.endswith(".value"):
            a = (torch.randn(rank, mod.in_features, generator=gen) * scale).float()
            b = (torch.randn(mod.out_features, rank, generator=gen) * scale).float()
            mod.lora_A = torch.nn.Parameter(a.double())
            mod.lora_B = torch.nn.Parameter(b.double())
            adapters[f"base_model.model.{name}.lora_A.weight"] = a
            adapters[f"base_model.model.{name}.lora_B.weight"] = b

            def fwd(x, m=mod):
                return F.linear(x, m.weight, m.bias) + (alpha / rank) * F.linear(F.linear(x, m.lora_A), m.lora_B)
            mod.forward = fwd
    return adapters
