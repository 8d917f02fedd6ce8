#!/usr/bin/env python3
"""Writes tests/data/transform_refs.safetensors: reference outputs of Pillow, torchvision and timm
for tests/test_transforms.cpp (the data pipeline's transforms must reproduce them).

8-bit images are stored as F16 arrays [H, W, C] (F16 holds every integer 0..255 exactly, at
half the size of F32); float outputs as F32. Contents:
  src.rgb / src.gray / src.photo     source images (seeded gradients + noise)
  resize.<src>.<interp>.<h>x<w>       PIL Image.resize((w, h), BILINEAR / BICUBIC)
  op.<Name>.m<mag>.<pos|neg>.<interp> timm auto_augment.NAME_TO_OP[Name] applied to src.rgb (or
                                      op_gray.* to src.gray) with the argument from
                                      LEVEL_TO_ARG[Name](mag, hparams), sign forced;
  arg.<same suffix>                   that argument (F64 [1]; 0 for argument-free ops)
  enhance.<Kind>.<factor>             ImageEnhance.<Kind>(src.rgb).enhance(factor) (ColorJitter's ops)
  eval.<case>                         timm transforms_imagenet_eval(...) output, F32 [C, H, W]
  mixup_target.batch / .elem          timm mixup_target for targets [3, 0, 4, 1], 5 classes,
                                      smoothing 0.1, lam 0.3 (a float) / [0.3, 0.7, 0.55, 1.0] (float32)
hparams for the ops: img_mean fill (124, 116, 104) (grey: 124), translate_const 5, translate_pct 0.45.

Run (Debian python3-pil, python3-torchvision; timm and safetensors from PyPI in a folder):
    /usr/bin/python3 -m pip install --no-deps --target ~/.cache/tessera/timm timm safetensors
    PYTHONPATH=~/.cache/tessera/timm /usr/bin/python3 tools/gen_transform_refs.py
"""
import os

import numpy as np
import PIL
import timm
import torch
import torchvision
from PIL import Image, ImageEnhance
from safetensors.torch import save_file
from timm.data import auto_augment as aa
from timm.data.mixup import mixup_target
from timm.data.transforms_factory import transforms_imagenet_eval

OUT = os.path.join(os.path.dirname(__file__), "..", "tests", "data", "transform_refs.safetensors")
INTERP = {"bilinear": Image.BILINEAR, "bicubic": Image.BICUBIC}
FILL = (124, 116, 104)
HPARAMS = dict(translate_const=5, img_mean=FILL, translate_pct=0.45)


def make_image(h, w, c, seed):
    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[0:h, 0:w]
    base = np.stack([xx * 255 / w, yy * 255 / h, (xx + yy) * 127 / (w + h) + 60], -1)
    img = np.clip(base + rng.normal(0, 40, (h, w, 3)), 0, 255).astype(np.uint8)
    return img if c == 3 else img[..., :1].copy()


def as_u8_tensor(pil_image):
    a = np.array(pil_image)
    if a.ndim == 2:
        a = a[..., None]
    return torch.from_numpy(a.astype(np.float16))


def pil(a):
    return Image.fromarray(a[..., 0] if a.shape[2] == 1 else a)


def main():
    out = {}
    srcs = {"rgb": make_image(12, 16, 3, 1), "gray": make_image(17, 19, 1, 2), "photo": make_image(40, 56, 3, 3)}
    for name, a in srcs.items():
        out[f"src.{name}"] = torch.from_numpy(a.astype(np.float16))

    for src, (h, w) in [("photo", (8, 11)), ("photo", (17, 23)), ("rgb", (29, 37)), ("rgb", (7, 40)),
                        ("gray", (30, 9))]:
        for interp, f in INTERP.items():
            out[f"resize.{src}.{interp}.{h}x{w}"] = as_u8_tensor(pil(srcs[src]).resize((w, h), f))

    def op_case(prefix, src, name, mag, negate, interp):
        aa._randomly_negate = (lambda v: -v) if negate else (lambda v: v)
        level_fn = aa.LEVEL_TO_ARG[name]
        args = level_fn(mag, HPARAMS) if level_fn is not None else ()
        fill = FILL if src.shape[2] == 3 else FILL[0]
        img = aa.NAME_TO_OP[name](pil(src), *args, fillcolor=fill, resample=INTERP[interp])
        key = f"{name}.m{mag}.{'neg' if negate else 'pos'}.{interp}"
        out[f"{prefix}.{key}"] = as_u8_tensor(img)
        out[f"arg{prefix[2:]}.{key}"] = torch.tensor([float(args[0]) if args else 0.0], dtype=torch.float64)

    geometric = {"Rotate", "ShearX", "ShearY", "TranslateX", "TranslateY", "TranslateXRel", "TranslateYRel"}
    signed = geometric | {"ColorIncreasing", "ContrastIncreasing", "BrightnessIncreasing", "SharpnessIncreasing"}
    for name in aa.NAME_TO_OP:
        if name in ("Desaturate", "GaussianBlur", "GaussianBlurRand"):
            continue  # only in timm's '3a' sets, which Tessera does not implement
        for negate in ([False, True] if name in signed else [False]):
            for interp in (["bilinear", "bicubic"] if name in geometric else ["bicubic"]):
                op_case("op", srcs["rgb"], name, 9, negate, interp)
    for name in ["PosterizeIncreasing", "SolarizeIncreasing", "SolarizeAdd", "Posterize", "Solarize"]:
        op_case("op", srcs["rgb"], name, 4.7, False, "bicubic")
    for name, negate, interp in [("Equalize", False, "bicubic"), ("AutoContrast", False, "bicubic"),
                                 ("ContrastIncreasing", True, "bicubic"), ("SharpnessIncreasing", False, "bicubic"),
                                 ("ColorIncreasing", False, "bicubic"), ("Rotate", True, "bicubic"),
                                 ("ShearX", False, "bilinear")]:
        op_case("op_gray", srcs["gray"], name, 9, negate, interp)
    aa._randomly_negate = lambda v: v

    for kind in ["Brightness", "Contrast", "Color", "Sharpness"]:
        for factor in [0.6, 1.37]:
            enhanced = getattr(ImageEnhance, kind)(pil(srcs["rgb"])).enhance(factor)
            out[f"enhance.{kind}.{factor}"] = as_u8_tensor(enhanced)

    eval_cases = {
        "photo_bicubic_28_0.875": ("photo", dict(img_size=28, crop_pct=0.875, interpolation="bicubic")),
        "rgb_bilinear_24_1.0": ("rgb", dict(img_size=24, crop_pct=1.0, interpolation="bilinear")),
        "gray_bilinear_16_0.9": ("gray", dict(img_size=16, crop_pct=0.9, interpolation="bilinear",
                                              mean=(0.5,), std=(0.25,))),
    }
    for case, (src, kw) in eval_cases.items():
        out[f"eval.{case}"] = transforms_imagenet_eval(**kw)(pil(srcs[src])).contiguous()

    target = torch.tensor([3, 0, 4, 1])
    out["mixup_target.batch"] = mixup_target(target, 5, lam=0.3, smoothing=0.1)
    lam = torch.tensor([0.3, 0.7, 0.55, 1.0], dtype=torch.float32).unsqueeze(1)
    out["mixup_target.elem"] = mixup_target(target, 5, lam=lam, smoothing=0.1)

    save_file({k: v.contiguous() for k, v in out.items()}, OUT,
              metadata={"pillow": PIL.__version__, "torchvision": torchvision.__version__, "timm": timm.__version__})
    print(f"{len(out)} tensors, {os.path.getsize(OUT)} bytes -> {OUT}")


if __name__ == "__main__":
    main()
