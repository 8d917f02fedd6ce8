#!/usr/bin/env python3
"""The GPU instrument that needs no GPU: a training step's launches, bytes and roofline time on an
H100, per kernel, for a batch too large to run on the SIMT emulator.

`tessera bench --device cuda --profile --json` (autograd/roofline.h) counts each device kernel's
launches and its operands' bytes and prices them with the roofline model, at the batch it ran. The
compute and memory parts grow linearly with the batch and the launches do not, so two small
batches give every kernel's line and the step at the training batch follows. A model, never a
measurement (docs/benchmarks.md, "The GPU instrument").

  bench/roofline.py --tessera build-emu/bin/tessera --out after.json      # profile and extrapolate
  bench/roofline.py --compare before.json after.json                      # the before/after table
"""
import argparse
import json
import subprocess
import sys

MODELS = {"xcit_small_12_p16_224": 224, "cait_s24_224": 224, "coat_lite_small": 224}


def profile(tessera, model, img, batch, amp, activations):
    cmd = [tessera, "bench", "--model", model, "--device", "cuda", "--mode", "train", "--batch", str(batch),
           "--img-size", str(img), "--steps", "1", "--warmup", "1", "--profile", "--json"]
    if amp != "off":
        cmd += ["--amp", amp, "--amp-activations", activations]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return json.loads(out)


def extrapolate(small, large, target):
    """Per kernel row (phase, kernel): launches as profiled, compute and memory parts and bytes
    carried linearly from the two batches to `target`."""
    b1, b2 = small["batch"], large["batch"]
    rows1 = {(r["phase"], r["kernel"]): r for r in small["profile"] if "launches" in r}
    rows2 = {(r["phase"], r["kernel"]): r for r in large["profile"] if "launches" in r}
    line = lambda v1, v2: v1 + (v2 - v1) * (target - b1) / (b2 - b1)
    rows = []
    for key in sorted(set(rows1) | set(rows2)):
        r1 = rows1.get(key, {"launches": 0, "bytes": 0, "model_compute_ms": 0, "model_memory_ms": 0,
                             "model_launch_ms": 0, "calls": 0})
        r2 = rows2.get(key, r1)
        if r1["launches"] != r2["launches"]:
            print(f"roofline.py: {key} launches {r1['launches']} at batch {b1}, {r2['launches']} at {b2}",
                  file=sys.stderr)
        compute = max(0.0, line(r1["model_compute_ms"], r2["model_compute_ms"]))
        memory = max(0.0, line(r1["model_memory_ms"], r2["model_memory_ms"]))
        rows.append({"phase": key[0], "kernel": key[1], "calls": r2["calls"], "launches": r2["launches"],
                     "bytes": max(0.0, line(r1["bytes"], r2["bytes"])),
                     "model_ms": max(compute, memory) + r2["model_launch_ms"],
                     "compute_ms": compute, "memory_ms": memory, "launch_ms": r2["model_launch_ms"]})
    rows.sort(key=lambda r: -r["model_ms"])
    return {"model": large["model"], "img_size": large["img_size"], "batch": target,
            "profiled_batches": [b1, b2], "gpu": large["device_per_step"]["roofline_gpu"],
            "kernel_calls": large["device_per_step"]["kernel_calls"],
            "launches": sum(r["launches"] for r in rows), "bytes": sum(r["bytes"] for r in rows),
            "model_ms": sum(r["model_ms"] for r in rows), "rows": rows}


def compare(before_path, after_path, top):
    before = {r["model"]: r for r in json.load(open(before_path))}
    after = {r["model"]: r for r in json.load(open(after_path))}
    print("| model | batch | launches/step | GB moved/step | roofline ms/step | images/s (model) |")
    print("|---|---:|---|---|---|---|")
    for m in after:
        b, a = before[m], after[m]
        ips = lambda r: r["batch"] / (r["model_ms"] / 1e3)
        print(f"| {m} | {a['batch']} | {b['launches']:.0f} → {a['launches']:.0f} ({a['launches'] / b['launches']:.0%}) "
              f"| {b['bytes'] / 1e9:.1f} → {a['bytes'] / 1e9:.1f} ({a['bytes'] / b['bytes']:.0%}) "
              f"| {b['model_ms']:.1f} → {a['model_ms']:.1f} ({b['model_ms'] / a['model_ms']:.2f}x) "
              f"| {ips(b):.0f} → {ips(a):.0f} |")
    for m, a in after.items():
        print(f"\n{m}, batch {a['batch']}: the {top} kernels the model ranks first (after)\n")
        print("| phase | kernel | launches | GB | compute ms | memory ms | launch ms | model ms |")
        print("|---|---|---:|---:|---:|---:|---:|---:|")
        for r in a["rows"][:top]:
            print(f"| {r['phase']} | {r['kernel']} | {r['launches']} | {r['bytes'] / 1e9:.2f} | "
                  f"{r['compute_ms']:.2f} | {r['memory_ms']:.2f} | {r['launch_ms']:.2f} | {r['model_ms']:.2f} |")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--tessera", default="build-emu/bin/tessera", help="an emulator (or GPU) build's tessera")
    p.add_argument("--models", nargs="*", default=list(MODELS))
    # Not batch 1: there some reductions over a size-1 dim take other paths (views, fewer launches).
    p.add_argument("--batches", nargs=2, type=int, default=[2, 3], help="the two batches profiled")
    p.add_argument("--target-batch", type=int, default=128)
    p.add_argument("--amp", default="bf16", help="bf16, fp16 or off")
    p.add_argument("--amp-activations", default="low", help="low or float32 (core/autocast.h)")
    p.add_argument("--out", help="write the extrapolated profiles here (JSON)")
    p.add_argument("--compare", nargs=2, metavar=("BEFORE", "AFTER"), help="print the before/after tables")
    p.add_argument("--top", type=int, default=10)
    args = p.parse_args()
    if args.compare:
        compare(*args.compare, args.top)
        return
    results = []
    for model in args.models:
        img = MODELS.get(model, 224)
        small, large = (profile(args.tessera, model, img, b, args.amp, args.amp_activations) for b in args.batches)
        r = extrapolate(small, large, args.target_batch)
        print(f"{model}: {r['launches']:.0f} launches, {r['bytes'] / 1e9:.2f} GB, {r['model_ms']:.2f} ms per step "
              f"at batch {r['batch']} ({r['gpu']})", flush=True)
        results.append(r)
    if args.out:
        with open(args.out, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
