#!/usr/bin/env python3
"""Writes the safetensors fixtures of tests/test_safetensors.cpp with the reference Python writer.

    PYTHONPATH=~/.cache/tessera/timm /usr/bin/python3 tools/make_safetensors_fixture.py

(safetensors 0.8.0, torch 1.13.) The values follow closed forms that the C++ test recomputes with
the same IEEE float32/float64 operations, so no expected values are stored besides these files:

  python_save_file.safetensors, metadata {"format": "pt", "note": NOTE}:
    "blocks.0.attn.qkv.weight"  F32  [3, 4]  (i - 5) / 7           (float32 arithmetic)
    "head.weight"               F64  [2, 3]  (i - 2) / 3           (float64 arithmetic)
    "norm.weight"               F16  [5]     float16((i - 2) / 3)  (float32 arithmetic, then rounded)
    "norm.bias"                 BF16 [2, 2]  bfloat16((i + 1) / 3) (float32 arithmetic, then rounded)
    "bn.num_batches_tracked"    I64  []      7
    "big"                       I64  [4]     [-2**62, -1, 0, 2**40 + 5]
    "mask"                      BOOL [2, 3]  i % 3 == 0
    "empty"                     F32  [0, 4]
    "ünï.cödé"                  F32  [2]     [1.5, -2.25]
  python_no_metadata.safetensors, no metadata:
    "x"                         F32  [2]     [1, 2]
where i is the row-major element index (torch.arange).
"""
import os

import torch
from safetensors.torch import save_file

NOTE = 'quote " backslash \\ tab \t newline \n unicode é ✓'
OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "data")


def main():
    f32 = torch.float32
    tensors = {
        "blocks.0.attn.qkv.weight": ((torch.arange(12, dtype=f32) - 5) / 7).reshape(3, 4),
        "head.weight": ((torch.arange(6, dtype=torch.float64) - 2) / 3).reshape(2, 3),
        "norm.weight": ((torch.arange(5, dtype=f32) - 2) / 3).to(torch.float16),
        "norm.bias": ((torch.arange(4, dtype=f32) + 1) / 3).to(torch.bfloat16).reshape(2, 2),
        "bn.num_batches_tracked": torch.tensor(7, dtype=torch.int64),
        "big": torch.tensor([-(2**62), -1, 0, 2**40 + 5], dtype=torch.int64),
        "mask": (torch.arange(6) % 3 == 0).reshape(2, 3),
        "empty": torch.zeros(0, 4, dtype=f32),
        "ünï.cödé": torch.tensor([1.5, -2.25], dtype=f32),
    }
    os.makedirs(OUT, exist_ok=True)
    save_file(tensors, os.path.join(OUT, "python_save_file.safetensors"), metadata={"format": "pt", "note": NOTE})
    save_file({"x": torch.tensor([1.0, 2.0])}, os.path.join(OUT, "python_no_metadata.safetensors"))


if __name__ == "__main__":
    main()
