#!/usr/bin/env python3
"""Runs an ONNX file in ONNX Runtime (CPU) on a .npy input and compares the result with the logits
Tessera computed (tests/test_onnx_export.cpp): prints the largest absolute difference and exits 1
when it exceeds the tolerance. ONNX Runtime comes from PyPI into a folder of its own (scripts/test.sh).

  PYTHONPATH=ORT_DIR python3 tests/onnx_runtime_check.py MODEL.onnx INPUT.npy EXPECTED.npy TOL
"""
import sys

import numpy as np
import onnxruntime as ort


def main():
    model, inputs, expected, tol = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4])
    session = ort.InferenceSession(model, providers=["CPUExecutionProvider"])
    got = session.run(["logits"], {"input": np.load(inputs)})[0]
    want = np.load(expected)
    if got.shape != want.shape:
        print(f"shape {got.shape} from ONNX Runtime, {want.shape} from Tessera")
        return 1
    diff = float(np.max(np.abs(got - want)))
    print(f"max |onnxruntime - tessera| = {diff:.3g} (tolerance {tol:g}), onnxruntime {ort.__version__}")
    return 0 if diff <= tol else 1


if __name__ == "__main__":
    sys.exit(main())
