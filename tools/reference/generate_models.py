#!/usr/bin/env python3
"""Goldens for the pretrained architectures (forgia::models), from `transformers` itself.

For a small random-initialized config of each architecture this writes, under
crates/forgia/tests/golden/models/:

    <arch>/model.safetensors, <arch>/config.json   the initial weights (save_pretrained, f32)
    <arch>.json                                     inputs and expectations

Expectations are computed in float64 from those f32 weights (so the reference is exact to
well below the f32 error forgia makes): the logits, the loss, the gradients of several named
parameters, and the loss curve of 5 AdamW steps (lr 1e-3 on the full model, 2e-2 on the LoRA adapters; the losses before
each update). Read by crates/forgia/tests/models.rs; PyTorch is never needed to run the tests.

Architectures:
  bert   BertForSequenceClassification (hidden 32, 2 layers, 4 heads, vocab 100), padded batch
         with token types; loss = cross-entropy over 3 labels.
  gpt2   GPT2LMHeadModel (n_embd 32, 2 layers, 4 heads, vocab 100); loss = causal LM loss.
  llama  LlamaForCausalLM (hidden 32, 2 layers, 4 heads, 2 KV heads, vocab 100, untied head).
  resnet ResNetForImageClassification (basic blocks, embedding 8, stages [8, 16], depths
         [1, 1], 5 labels) on 4 images 3x16x16; BatchNorm weights, biases and running
         statistics are randomized before saving. `eval_logits` are the logits in eval mode
         (running statistics); the loss, gradients and curve are in training mode (batch
         statistics), as fine-tuning runs.
  lora   the bert model with rank-4 adapters (alpha 8) on every query and value layer, base
         frozen; adapters written as PEFT's adapter_model.safetensors names
         (base_model.model.<layer>.lora_A.weight), B drawn nonzero so gradients flow; the 5
         AdamW steps train the adapters only.

Dropout is 0 everywhere (the comparison is deterministic). Attention is `eager`.

Usage:  /work/.venv-torch/bin/python tools/reference/generate_models.py [--out DIR]
"""
import json
import os

import torch
import torch.nn.functional as F
from safetensors.torch import save_file
from transformers import (BertConfig, BertForSequenceClassification, GPT2Config, GPT2LMHeadModel,
                          LlamaConfig, LlamaForCausalLM, ResNetConfig, ResNetForImageClassification)

from golden_common import GOLDEN, add_lora, flat9, out_arg

SEED = 16
B, S, V = 3, 8, 100


def inputs(gen):
    ids = torch.randint(0, V, (B, S), generator=gen)
    mask = torch.ones(B, S, dtype=torch.long)
    mask[1, 6:] = 0
    mask[2, 3:] = 0
    return ids, mask


def run(model, loss_fn, named, steps=5, trainable=None, lr=1e-3):
    """The loss, its gradients for `named`, the logits, and the 5-step AdamW loss curve."""
    params = [p for p in model.parameters() if p.requires_grad] if trainable is None else trainable
    logits, loss = loss_fn()
    loss.backward()
    grads = {n: flat9(dict(model.named_parameters())[n].grad) for n in named}
    out = {"logits_shape": list(logits.shape), "logits": flat9(logits.detach()), "loss": float(loss.detach()), "grads": grads}
    model.zero_grad()
    opt = torch.optim.AdamW(params, lr=lr)
    curve = []
    for _ in range(steps):
        opt.zero_grad()
        _, loss = loss_fn()
        curve.append(float(loss))
        loss.backward()
        opt.step()
    out["curve"] = curve
    return out


def save_model(model, out, name):
    d = os.path.join(out, name)
    model.save_pretrained(d, safe_serialization=True)
    gen_cfg = os.path.join(d, "generation_config.json")
    if os.path.exists(gen_cfg):
        os.remove(gen_cfg)  # not read by forgia
    return d


def small_bert():
    """The small BertForSequenceClassification that `bert` and `lora` share (seeded by the caller)."""
    cfg = BertConfig(vocab_size=V, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                     intermediate_size=64, max_position_embeddings=16, hidden_dropout_prob=0.0,
                     attention_probs_dropout_prob=0.0, num_labels=3, attn_implementation="eager")
    return BertForSequenceClassification(cfg).eval()


def bert(out, gen):
    torch.manual_seed(SEED)
    model = small_bert()
    save_model(model, out, "bert")
    model = model.double()
    ids, mask = inputs(gen)
    types = torch.randint(0, 2, (B, S), generator=gen)
    labels = torch.tensor([0, 2, 1])

    def loss_fn():
        logits = model(input_ids=ids, token_type_ids=types, attention_mask=mask).logits
        return logits, F.cross_entropy(logits, labels)

    named = ["classifier.weight", "bert.pooler.dense.bias", "bert.encoder.layer.0.attention.self.query.bias",
             "bert.encoder.layer.1.output.LayerNorm.weight", "bert.embeddings.token_type_embeddings.weight",
             "bert.embeddings.LayerNorm.bias"]
    res = run(model, loss_fn, named)
    res.update(input_ids=ids.reshape(-1).tolist(), token_type_ids=types.reshape(-1).tolist(),
               attention_mask=mask.reshape(-1).tolist(), labels=labels.tolist(), batch=B, seq=S)
    return res


def lora(out, gen):
    torch.manual_seed(SEED)  # the same base weights as `bert`
    model = small_bert()
    for p in model.parameters():
        p.requires_grad_(False)
    rank, alpha = 4, 8.0
    adapters = add_lora(model, rank, alpha, gen, 0.2)
    os.makedirs(os.path.join(out, "lora"), exist_ok=True)
    save_file(adapters, os.path.join(out, "lora", "adapter_model.safetensors"), metadata={"format": "pt"})
    model = model.double()
    ids, mask = inputs(gen)
    labels = torch.tensor([1, 0, 2])

    def loss_fn():
        logits = model(input_ids=ids, attention_mask=mask).logits
        return logits, F.cross_entropy(logits, labels)

    named = ["bert.encoder.layer.0.attention.self.query.lora_A", "bert.encoder.layer.1.attention.self.value.lora_B"]
    trainable = [p for n, p in model.named_parameters() if "lora_" in n]
    res = run(model, loss_fn, named, trainable=trainable, lr=2e-2)
    # forgia's names for the same parameters
    res["grads"] = {k + ".weight": v for k, v in res["grads"].items()}
    res.update(input_ids=ids.reshape(-1).tolist(), attention_mask=mask.reshape(-1).tolist(),
               labels=labels.tolist(), batch=B, seq=S, rank=rank, alpha=alpha)
    return res


def causal_lm(model, out, name, gen, named):
    """Saves `model`, then runs it in float64 on random ids with the causal LM loss (labels = ids)."""
    save_model(model, out, name)
    model = model.double()
    ids, _ = inputs(gen)

    def loss_fn():
        o = model(input_ids=ids, labels=ids)
        return o.logits, o.loss

    res = run(model, loss_fn, named)
    res.update(input_ids=ids.reshape(-1).tolist(), batch=B, seq=S)
    return res


def gpt2(out, gen):
    torch.manual_seed(SEED)
    cfg = GPT2Config(vocab_size=V, n_positions=16, n_embd=32, n_layer=2, n_head=4, resid_pdrop=0.0,
                     embd_pdrop=0.0, attn_pdrop=0.0, attn_implementation="eager")
    named = ["transformer.wte.weight", "transformer.h.0.attn.c_attn.bias", "transformer.h.1.mlp.c_proj.bias",
             "transformer.ln_f.weight", "transformer.wpe.weight"]
    return causal_lm(GPT2LMHeadModel(cfg).eval(), out, "gpt2", gen, named)


def llama(out, gen):
    torch.manual_seed(SEED)
    cfg = LlamaConfig(vocab_size=V, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=16,
                      rms_norm_eps=1e-6, rope_theta=10000.0, tie_word_embeddings=False,
                      attn_implementation="eager")
    named = ["lm_head.weight", "model.norm.weight", "model.layers.0.self_attn.k_proj.weight",
             "model.layers.1.mlp.gate_proj.weight", "model.layers.0.input_layernorm.weight"]
    return causal_lm(LlamaForCausalLM(cfg).eval(), out, "llama", gen, named)


def resnet(out, gen):
    torch.manual_seed(SEED)
    cfg = ResNetConfig(num_channels=3, embedding_size=8, hidden_sizes=[8, 16], depths=[1, 1], layer_type="basic",
                       hidden_act="relu", downsample_in_first_stage=False, num_labels=5)
    model = ResNetForImageClassification(cfg)
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, torch.nn.BatchNorm2d):
                m.weight.copy_(1 + 0.2 * torch.randn(m.weight.shape, generator=gen))
                m.bias.copy_(0.1 * torch.randn(m.bias.shape, generator=gen))
                m.running_mean.copy_(0.1 * torch.randn(m.running_mean.shape, generator=gen))
                m.running_var.copy_(0.5 + torch.rand(m.running_var.shape, generator=gen))
    save_model(model, out, "resnet")
    model = model.double()
    pixels = torch.randn(4, 3, 16, 16, generator=gen).float()
    labels = torch.tensor([0, 3, 4, 1])
    model.eval()
    with torch.no_grad():
        eval_logits = model(pixel_values=pixels.double()).logits
    model.train()

    def loss_fn():
        logits = model(pixel_values=pixels.double()).logits
        return logits, F.cross_entropy(logits, labels)

    named = ["classifier.1.weight", "resnet.embedder.embedder.convolution.weight",
             "resnet.encoder.stages.1.layers.0.shortcut.normalization.weight",
             "resnet.encoder.stages.0.layers.0.layer.1.normalization.bias"]
    res = run(model, loss_fn, named)
    res.update(pixels=flat9(pixels), pixels_shape=list(pixels.shape), labels=labels.tolist(),
               eval_logits=flat9(eval_logits))
    return res


def main():
    out = out_arg(os.path.join(GOLDEN, "models"))
    os.makedirs(out, exist_ok=True)
    for name, fn in [("bert", bert), ("lora", lora), ("gpt2", gpt2), ("llama", llama), ("resnet", resnet)]:
        gen = torch.Generator().manual_seed(SEED)
        res = fn(out, gen)
        with open(os.path.join(out, f"{name}.json"), "w") as f:
            json.dump(res, f, separators=(",", ":"))
        print(name, "loss", res["loss"], "curve", [round(c, 6) for c in res["curve"]])


if __name__ == "__main__":
    main()
