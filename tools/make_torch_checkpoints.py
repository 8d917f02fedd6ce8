#!/usr/bin/env python3
"""Writes the PyTorch-checkpoint fixtures of tests/test_torch_checkpoint.cpp into tests/data/torch/.

    /usr/bin/python3 tools/make_torch_checkpoints.py      (Debian's python3-torch; no timm needed)

Genuine files, written by torch.save from the weights of the timm parity fixtures
(tests/goldens/<case>.weights.safetensors, read here without the safetensors package):
  xcit_official.pth         {"model": xcit_reduced in facebookresearch/xcit's names (pos_embeder,
                            one qkv Linear per class-attention block), "epoch": 400}
  cait_model.pth            {"model": cait_reduced, plus plain values: epoch, lr, a name, a list, a
                            bool, None}
  coat_lite_state_dict.pth  {"state_dict": coat_lite_reduced under "module." (DistributedDataParallel),
                            one weight a transposed (non-contiguous) view, one a view at an offset
                            into a larger storage}
  coat_ema.pth              {"model": zeros, "model_ema": coat_reduced}
  dtypes.pth / .safetensors float16, bfloat16, float64, int64, bool, empty, 0-d, two views of one
                            storage; the .safetensors holds the same values (the expected ones)
  deflated.pth              dtypes.pth with every entry deflated
  zip64.pth                 dtypes.pth with zip64 extra fields and zip64 end records
  legacy.pth                a pickle of PyTorch's legacy format (before 1.6)
Hostile files (hostile/), each refused with a message and nothing run:
  os_system.pth, builtins_eval.pth (STACK_GLOBAL), subprocess.pth: globals a state dict never names
  reduce_storage.pth        REDUCE on a storage class
  oversized_storage.pth     a storage claiming more elements than its entry holds
  recursive.pth             a list that contains itself
  deep.pth                  100,000 nested lists
  shared_lists.pth          31 lists, each holding the one before twice: 2^30 paths through 31 values
  truncated.pth             dtypes.pth cut in half
  zip_bomb.pth              deflated.pth whose data/0 claims 2 GB from a few bytes
"""
import collections
import io
import json
import os
import pickle
import struct
import zipfile

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
GOLDENS = os.path.join(HERE, "..", "tests", "goldens")
OUT = os.path.join(HERE, "..", "tests", "data", "torch")

ST_DTYPES = {"F32": torch.float32, "F64": torch.float64, "F16": torch.float16, "BF16": torch.bfloat16,
             "I64": torch.int64, "BOOL": torch.bool}
ST_NAMES = {v: k for k, v in ST_DTYPES.items()}


def read_safetensors(path):
    with open(path, "rb") as f:
        data = f.read()
    n = struct.unpack("<Q", data[:8])[0]
    header = json.loads(data[8:8 + n])
    out = collections.OrderedDict()
    for name, info in header.items():
        if name == "__metadata__":
            continue
        b, e = info["data_offsets"]
        raw = bytearray(data[8 + n + b:8 + n + e])
        dtype = ST_DTYPES[info["dtype"]]
        t = torch.frombuffer(raw, dtype=torch.uint8) if raw else torch.zeros(0, dtype=torch.uint8)
        out[name] = t.view(dtype).reshape(info["shape"]).clone()
    return out


def write_safetensors(path, tensors):
    header, blobs, offset = {}, [], 0
    for name, t in tensors.items():
        t = t.contiguous()
        raw = t.reshape(-1).view(torch.uint8).numpy().tobytes() if t.numel() else b""
        header[name] = {"dtype": ST_NAMES[t.dtype], "shape": list(t.shape), "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))


def save(obj, name):
    torch.save(obj, os.path.join(OUT, name))


def rezip(src, dst, compression=zipfile.ZIP_STORED):
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w", compression) as zout:
        for info in zin.infolist():
            zout.writestr(info.filename, zin.read(info.filename))


def hostile_zip(name, pickle_bytes, extra=()):
    with zipfile.ZipFile(os.path.join(OUT, "hostile", name), "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("archive/data.pkl", pickle_bytes)
        z.writestr("archive/version", "3\n")
        for entry, data in extra:
            z.writestr(entry, data)


def xcit_official(sd):
    """timm's names -> facebookresearch/xcit's (the inverse of timm's checkpoint_filter_fn)."""
    out = collections.OrderedDict()
    for k, v in sd.items():
        if k.startswith("pos_embed."):
            out["pos_embeder." + k[len("pos_embed."):]] = v
        elif ".attn.q." in k and k.startswith("cls_attn_blocks."):
            base, kind = k.split(".attn.q.")
            out[f"{base}.attn.qkv.{kind}"] = torch.cat([sd[f"{base}.attn.{s}.{kind}"] for s in "qkv"], 0)
        elif (".attn.k." in k or ".attn.v." in k) and k.startswith("cls_attn_blocks."):
            continue
        else:
            out[k] = v
    return out


def main():
    os.makedirs(os.path.join(OUT, "hostile"), exist_ok=True)
    golden = lambda case: read_safetensors(os.path.join(GOLDENS, case + ".weights.safetensors"))

    save({"model": xcit_official(golden("xcit_reduced")), "epoch": 400}, "xcit_official.pth")
    save({"model": golden("cait_reduced"), "epoch": 3, "lr": 0.1, "arch": "cait", "milestones": [1, 2, 3],
          "best": True, "scaler": None}, "cait_model.pth")

    coat = golden("coat_lite_reduced")
    wrapped = collections.OrderedDict()
    for i, (k, v) in enumerate(coat.items()):
        if v.dim() == 2 and "transposed" not in wrapped:
            v = v.t().contiguous().t()  # same values, column-major strides
            wrapped["transposed"] = None
        elif v.dim() == 1 and v.numel() > 1 and "offset" not in wrapped:
            big = torch.cat([torch.full((5,), 7.0, dtype=v.dtype), v, torch.zeros(3, dtype=v.dtype)])
            v = big[5:5 + v.numel()]  # storage offset 5 into a larger storage
            wrapped["offset"] = None
        wrapped["module." + k] = v
    del wrapped["transposed"], wrapped["offset"]
    save({"state_dict": wrapped}, "coat_lite_state_dict.pth")

    ema = golden("coat_reduced")
    save({"model": collections.OrderedDict((k, torch.zeros_like(v)) for k, v in ema.items()), "model_ema": ema},
         "coat_ema.pth")

    g = torch.Generator().manual_seed(0)
    base = torch.randn(4, 6, generator=g, dtype=torch.float64)
    shared = torch.arange(12, dtype=torch.float32)
    dtypes = collections.OrderedDict([
        ("f16", base.to(torch.float16)), ("bf16", base.to(torch.bfloat16)), ("f64", base),
        ("i64", torch.tensor([-(2**62), -1, 0, 2**40 + 5])), ("bool", torch.tensor([True, False, True])),
        ("empty", torch.zeros(0, 4)), ("scalar", torch.tensor(2.5)),
        ("shared_a", shared[2:8].view(2, 3)), ("shared_b", shared.view(3, 4)[:, 1]),
    ])
    save(dtypes, "dtypes.pth")
    write_safetensors(os.path.join(OUT, "dtypes.safetensors"), dtypes)
    rezip(os.path.join(OUT, "dtypes.pth"), os.path.join(OUT, "deflated.pth"), zipfile.ZIP_DEFLATED)
    limit = zipfile.ZIP64_LIMIT
    zipfile.ZIP64_LIMIT = 0  # every size and offset in zip64 fields, and the zip64 end records
    rezip(os.path.join(OUT, "dtypes.pth"), os.path.join(OUT, "zip64.pth"))
    zipfile.ZIP64_LIMIT = limit
    torch.save({"w": torch.ones(2)}, os.path.join(OUT, "legacy.pth"), _use_new_zipfile_serialization=False)

    hostile_zip("os_system.pth", b"\x80\x02cos\nsystem\nq\x00X\x0b\x00\x00\x00echo pwned!q\x01\x85q\x02Rq\x03.")
    hostile_zip("builtins_eval.pth",
                b"\x80\x04\x8c\x08builtins\x94\x8c\x04eval\x94\x93\x94\x8c\x0b1 + 1 == 2 \x94\x85\x94R\x94.")
    hostile_zip("subprocess.pth", b"\x80\x02csubprocess\nPopen\nq\x00X\x02\x00\x00\x00lsq\x01\x85q\x02R.")
    hostile_zip("reduce_storage.pth", b"\x80\x02ctorch\nFloatStorage\nq\x00)R.")
    storage_id = b"(X\x07\x00\x00\x00storagectorch\nFloatStorage\nX\x01\x00\x00\x000X\x03\x00\x00\x00cpuJ\x00\x00\x10\x00tQ"
    rebuild = (b"\x80\x02}(X\x01\x00\x00\x00wctorch._utils\n_rebuild_tensor_v2\n(" + storage_id +
               b"K\x00J\x00\x00\x10\x00\x85K\x01\x85\x89ccollections\nOrderedDict\n)RtRu.")
    hostile_zip("oversized_storage.pth", rebuild, [("archive/data/0", b"\x00" * 16)])
    hostile_zip("recursive.pth", b"\x80\x02]q\x00h\x00a.")
    hostile_zip("deep.pth", b"\x80\x02" + b"]" * 100000 + b"a" * 99999 + b".")
    dag = b"\x80\x02(]q\x00" + b"".join(b"](h%ch%ceq%c" % (i - 1, i - 1, i) for i in range(1, 31)) + b"t."
    hostile_zip("shared_lists.pth", dag)
    with open(os.path.join(OUT, "dtypes.pth"), "rb") as f:
        whole = f.read()
    with open(os.path.join(OUT, "hostile", "truncated.pth"), "wb") as f:
        f.write(whole[:len(whole) // 2])
    with open(os.path.join(OUT, "deflated.pth"), "rb") as f:
        bomb = bytearray(f.read())
    at = 0
    while True:  # the central directory entry of .../data/0: its uncompressed size -> 2 GB
        at = bomb.index(b"PK\x01\x02", at)
        n = struct.unpack("<H", bomb[at + 28:at + 30])[0]
        if bomb[at + 46:at + 46 + n].endswith(b"/data/0"):
            bomb[at + 24:at + 28] = struct.pack("<I", 2_000_000_000)
            break
        at += 4
    with open(os.path.join(OUT, "hostile", "zip_bomb.pth"), "wb") as f:
        f.write(bomb)


if __name__ == "__main__":
    main()
