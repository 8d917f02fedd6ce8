#!/usr/bin/env python3
"""Writes timm parity goldens as safetensors files under tests/goldens/.

For each case: a timm model with random (seeded) weights - including BatchNorm running stats and
LayerScale gammas, so every parameter matters - its state_dict as `<case>.weights.safetensors`,
and `<case>.golden.safetensors` with the input, the eval-mode logits, the train-mode logits, and
the gradients of loss = sum(logits_train * probe) w.r.t. the input and some parameters.

Run (timm from PyPI into a folder, Debian's python3-torch and python3-torchvision):
    /usr/bin/python3 -m pip install --no-deps --target /opt/timm timm safetensors
    PYTHONPATH=/opt/timm /usr/bin/python3 tools/gen_goldens.py
"""
import os

import torch
import timm.models.cait as cait
import timm.models.coat as coat
import timm.models.xcit as xcit
from safetensors.torch import save_file

OUT = os.path.join(os.path.dirname(__file__), "..", "tests", "goldens")


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


def write_case(case, model, image_shape, grad_params, seed=0):
    randomize(model, seed)
    g = torch.Generator().manual_seed(seed + 1)
    x = torch.randn(image_shape, generator=g)
    # clone(): CoaT's alias keys share storage, which safetensors refuses to write as such.
    weights = {k: v.clone() for k, v in model.state_dict().items()}
    save_file(weights, os.path.join(OUT, case + ".weights.safetensors"), metadata={"format": "pt"})

    model.eval()
    with torch.no_grad():
        logits_eval = model(x)
    model.train()  # dropout and drop-path rates are 0; BatchNorm uses batch statistics
    xg = x.clone().requires_grad_(True)
    logits_train = model(xg)
    probe = torch.randn(logits_train.shape, generator=g)
    (logits_train * probe).sum().backward()
    named = dict(model.named_parameters())
    golden = {"input": x, "logits_eval": logits_eval, "logits_train": logits_train.detach(), "probe": probe,
              "grad.input": xg.grad}
    for p in grad_params:
        golden["grad." + p] = named[p].grad
    save_file({k: v.contiguous() for k, v in golden.items()}, os.path.join(OUT, case + ".golden.safetensors"),
              metadata={"format": "pt", "timm": __import__("timm").__version__, "torch": torch.__version__})


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


if __name__ == "__main__":
    main()
