#!/usr/bin/env python3
"""Writes timm parity goldens as safetensors files under tests/goldens/ (read by tests/test_parity.cpp).

Two kinds of cases, each with `<case>.golden.safetensors` holding the eval-mode logits, the
train-mode logits (dropout and drop-path 0, BatchNorm on batch statistics), a probe and the
gradients of loss = sum(logits_train * probe) w.r.t. the input and a few named parameters:

* Reduced configs (small widths and depths built from timm's classes): random seeded weights,
  including BatchNorm running stats and LayerScale gammas so that every parameter matters, stored
  as `<case>.weights.safetensors`; the golden also holds the input.
* Real named variants (timm.create_model(name, num_classes=10, img_size=...)): millions of
  parameters, too many to store, so both sides GENERATE the weights and the input from the formula
  below (tests/parity_weights.h is the C++ side; the two must stay identical). These goldens hold
  no weights and no input, but the names of the filled tensors (metadata "tensors", which the test
  compares with the model's own), the float64 sum of every filled tensor ("check.sums") and a few
  small tensors in full ("check.<name>"), so that the test can prove its weights are timm's bit for
  bit before it compares outputs.

Parity weight formula. Every floating parameter and buffer, keyed by its name in
named_parameters() then named_buffers() (unique tensors, first path wins: CoaT's shared CPE/CRPE
modules are named cpe1 / crpe1.conv_list.0 ... as in timm), element i in row-major order:
    h  = FNV-1a 32-bit hash of the name's UTF-8 bytes
    x  = fmix32((h + i * 0x9E3779B9) mod 2^32)   (MurmurHash3's finalizer; uint32 arithmetic)
    u  = (x >> 8) / 2^24 - 0.5                   (in [-0.5, 0.5), a multiple of 2^-24)
    name ends with "temperature" or "running_var":  1 + u/2
    name ends with "weight", >= 2 dims:             4u / sqrt(fan_in), fan_in = numel / shape[0]
    name ends with "weight", 1 dim (a norm's):      1 + u/4
    anything else (biases, gammas, tokens, position tables, running_mean):  u/4
computed in float64 and rounded once to float32; int64 buffers (num_batches_tracked) are 0. The
input is the tensor named "input", 4u. The scales are powers of two, so every value except the
weights' division is exact in float64 and no compiler contraction (FMA) can change a bit; the
division and the square root are correctly rounded IEEE operations on both sides.

Run (timm from PyPI into a folder, Debian's python3-torch and python3-torchvision); one command
rewrites every file:
    /usr/bin/python3 -m pip install --no-deps --target ~/.cache/tessera/timm timm safetensors
    PYTHONPATH=~/.cache/tessera/timm /usr/bin/python3 tools/gen_goldens.py
"""
import os

import numpy as np
import timm
import torch
import timm.models.cait as cait
import timm.models.coat as coat
import timm.models.xcit as xcit
from safetensors.torch import save_file

OUT = os.path.join(os.path.dirname(__file__), "..", "tests", "goldens")
MASK = np.uint64(0xFFFFFFFF)


def fnv1a32(name):
    h = 0x811C9DC5
    for byte in name.encode():
        h = ((h ^ byte) * 0x01000193) & 0xFFFFFFFF
    return h


def parity_unit(name, n):
    """u_0 .. u_{n-1} of the parity formula, float64 (uint64 arrays hold the uint32 arithmetic)."""
    x = (np.uint64(fnv1a32(name)) + np.arange(n, dtype=np.uint64) * np.uint64(0x9E3779B9)) & MASK
    x ^= x >> np.uint64(16)
    x = (x * np.uint64(0x85EBCA6B)) & MASK
    x ^= x >> np.uint64(13)
    x = (x * np.uint64(0xC2B2AE35)) & MASK
    x ^= x >> np.uint64(16)
    return (x >> np.uint64(8)).astype(np.float64) / 2.0**24 - 0.5


def parity_tensor(name, shape, dtype=torch.float32):
    shape = tuple(shape)
    if dtype == torch.int64:
        return torch.zeros(shape, dtype=torch.int64)
    assert dtype == torch.float32, (name, dtype)
    n = int(np.prod(shape, dtype=np.int64))
    u = parity_unit(name, n)
    if name == "input":
        v = 4.0 * u
    elif name.endswith(("temperature", "running_var")):
        v = 1.0 + u / 2.0
    elif name.endswith("weight") and len(shape) >= 2:
        v = u * 4.0 / np.sqrt(np.float64(n // shape[0]))
    elif name.endswith("weight"):
        v = 1.0 + u / 4.0
    else:
        v = u / 4.0
    return torch.from_numpy(v.astype(np.float32).reshape(shape))


def fill_parity_weights(model):
    """Fills the model by the formula; returns the filled names in order."""
    norms = (torch.nn.LayerNorm, torch.nn.BatchNorm2d, torch.nn.GroupNorm)
    modules = dict(model.named_modules())
    names = []
    with torch.no_grad():
        for name, t in list(model.named_parameters()) + list(model.named_buffers()):
            # The formula tells norm weights by their single dimension: make sure that holds.
            if name.endswith("weight") and t.dim() == 1:
                assert isinstance(modules[name.rsplit(".", 1)[0]], norms), name
            t.copy_(parity_tensor(name, t.shape, t.dtype))
            names.append(name)
    return names


def randomize(model, seed):
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, t in model.state_dict().items():
            if t.dtype == torch.int64:
                continue
            if name.endswith("running_var"):
                t.copy_(torch.rand(t.shape, generator=g) + 0.5)
            elif name.endswith(("norm1.weight", "norm2.weight", "norm3.weight", "norm.weight", ".1.weight", "bn.weight")):
                t.copy_(1.0 + 0.1 * torch.randn(t.shape, generator=g))
            else:
                t.copy_(0.2 * torch.randn(t.shape, generator=g))


def run_model(model, x, g, grad_params):
    """Eval logits, train logits, probe and gradients, as a dict of golden tensors."""
    model.eval()
    with torch.no_grad():
        logits_eval = model(x)
    model.train()  # dropout and drop-path rates are 0; BatchNorm uses batch statistics
    xg = x.clone().requires_grad_(True)
    logits_train = model(xg)
    probe = torch.randn(logits_train.shape, generator=g)
    (logits_train * probe).sum().backward()
    named = dict(model.named_parameters())
    golden = {"logits_eval": logits_eval, "logits_train": logits_train.detach(), "probe": probe,
              "grad.input": xg.grad}
    for p in grad_params:
        golden["grad." + p] = named[p].grad
    return golden


def save_golden(case, golden, metadata=None):
    metadata = dict(metadata or {}, format="pt", timm=timm.__version__, torch=torch.__version__)
    save_file({k: v.contiguous() for k, v in golden.items()}, os.path.join(OUT, case + ".golden.safetensors"),
              metadata=metadata)


def write_case(case, model, image_shape, grad_params, seed=0):
    randomize(model, seed)
    g = torch.Generator().manual_seed(seed + 1)
    x = torch.randn(image_shape, generator=g)
    # clone(): CoaT's alias keys share storage, which safetensors refuses to write as such.
    weights = {k: v.clone() for k, v in model.state_dict().items()}
    save_file(weights, os.path.join(OUT, case + ".weights.safetensors"), metadata={"format": "pt"})
    save_golden(case, dict(input=x, **run_model(model, x, g, grad_params)))


def write_named_case(name, img_size, grad_params, checks, batch=2, num_classes=10):
    """A named timm variant with parity-formula weights; `checks` are small tensors stored in full."""
    model = timm.create_model(name, num_classes=num_classes, img_size=img_size)
    names = fill_parity_weights(model)
    tensors = dict(list(model.named_parameters()) + list(model.named_buffers()))
    x = parity_tensor("input", (batch, 3, img_size, img_size))
    golden = run_model(model, x, torch.Generator().manual_seed(1), grad_params)
    # After run_model: the train-mode pass has updated BatchNorm's running statistics, so these are
    # recomputed from the formula rather than read from the model.
    golden["check.sums"] = torch.tensor([parity_tensor(k, tensors[k].shape, tensors[k].dtype).double().sum().item()
                                         for k in names], dtype=torch.float64)
    golden["check.input"] = torch.tensor([x.double().sum().item()], dtype=torch.float64)
    for k in checks:
        golden["check." + k] = parity_tensor(k, tensors[k].shape)
    save_golden(f"{name}_{img_size}", golden, {"tensors": "\n".join(names)})


def main():
    os.makedirs(OUT, exist_ok=True)
    torch.manual_seed(0)
    # Reduced XCiT: d 32, 2 XCA blocks, 4 heads, patch 16 on 32x32 images, 10 classes, eta 0.5.
    model = xcit.Xcit(img_size=32, patch_size=16, embed_dim=32, depth=2, num_heads=4, eta=0.5, tokens_norm=True,
                      num_classes=10)
    write_case("xcit_reduced", model, (2, 3, 32, 32),
               ["cls_token", "patch_embed.proj.0.0.weight", "blocks.0.attn.temperature", "blocks.1.gamma3",
                "blocks.1.local_mp.conv1.weight", "cls_attn_blocks.0.attn.q.weight", "cls_attn_blocks.1.mlp.fc2.bias",
                "head.weight"])
    # Reduced CaiT: d 32, 2 talking-heads blocks, 4 heads, 32x32 images, LayerScale 0.5.
    model = cait.Cait(img_size=32, patch_size=16, embed_dim=32, depth=2, num_heads=4, init_values=0.5, num_classes=10)
    write_case("cait_reduced", model, (2, 3, 32, 32),
               ["cls_token", "pos_embed", "patch_embed.proj.weight", "blocks.0.attn.proj_l.weight",
                "blocks.1.attn.proj_w.bias", "blocks_token_only.0.attn.k.weight", "blocks_token_only.1.gamma_2",
                "head.weight"])
    # Reduced CoaT-Lite and CoaT: 16 channels per stage (8 heads of 2), one serial block per stage,
    # 32x32 images (stage grids 8, 4, 2, 1); the full CoaT adds one parallel block.
    for case, parallel in (("coat_lite_reduced", 0), ("coat_reduced", 1)):
        model = coat.CoaT(img_size=32, patch_size=4, embed_dims=(16, 16, 16, 16), serial_depths=(1, 1, 1, 1),
                          parallel_depth=parallel, num_heads=8, mlp_ratios=(2, 2, 2, 2), num_classes=10)
        params = ["cls_token1", "patch_embed1.proj.weight", "serial_blocks2.0.factoratt_crpe.qkv.weight",
                  "serial_blocks4.0.mlp.fc1.bias", "head.weight"]
        if parallel:
            params += ["parallel_blocks.0.norm13.weight", "parallel_blocks.0.factoratt_crpe4.proj.weight",
                       "aggregate.weight"]
        write_case(case, model, (2, 3, 32, 32), params)

    # Named variants at small inputs, parity-formula weights (files <name>_<img_size>.golden.safetensors).
    # XCiT-N12/16 at 64 (4x4 tokens) and XCiT-N12/8 at 32 (the 3-stage patch embedding, 4x4 tokens).
    for name, img in (("xcit_nano_12_p16_224", 64), ("xcit_nano_12_p8_224", 32)):
        write_named_case(name, img,
                         ["cls_token", "patch_embed.proj.0.1.weight", "blocks.0.attn.temperature", "blocks.11.gamma3",
                          "cls_attn_blocks.1.norm1.weight", "head.bias"],
                         ["blocks.0.attn.temperature", "patch_embed.proj.0.1.running_var", "head.bias"])
    # CaiT-XXS24 at 64: 4x4 tokens, a 16-entry position table.
    write_named_case("cait_xxs24_224", 64,
                     ["cls_token", "blocks.0.gamma_1", "blocks.23.attn.proj_w.bias", "blocks_token_only.1.norm1.weight",
                      "head.bias"],
                     ["blocks.0.attn.proj_l.weight", "blocks.0.attn.proj_w.bias", "head.bias"])
    # CoaT-Lite Tiny and CoaT Tiny at 64 (stage grids 16, 8, 4, 2).
    write_named_case("coat_lite_tiny", 64,
                     ["cls_token1", "crpe1.conv_list.0.bias", "serial_blocks4.1.norm2.weight", "norm4.weight",
                      "head.bias"],
                     ["crpe1.conv_list.0.bias", "head.bias"])
    write_named_case("coat_tiny", 64,
                     ["cls_token1", "crpe2.conv_list.2.bias", "parallel_blocks.0.factoratt_crpe2.proj.bias",
                      "parallel_blocks.5.norm24.weight", "aggregate.weight", "head.bias"],
                     ["aggregate.weight", "aggregate.bias", "head.bias"])


if __name__ == "__main__":
    main()
