#!/usr/bin/env python3
"""The GPU instrument that needs no GPU: what a training step queues on the device (kernels, library
calls, memory operations), the bytes it moves and its roofline time on an H100, per kernel, for a
batch too large to run on the SIMT emulator.

`tessera bench --device cuda --profile --json` (autograd/profiler.h, autograd/roofline.h) counts
what each device kernel call queues and its operands' bytes and prices them with the roofline
model, at the batch it ran; with --cuda-graph the same run captures the step and reports the
graph's nodes. Every term is measured at two batches and carried along its line to the training
batch: none is assumed constant in the batch (a GEMM plan that loops over the samples makes calls in
proportion to it, and so would anything else that does). A model, never a measurement
(docs/benchmarks.md, "The GPU instrument").

  bench/roofline.py --tessera build/bin/tessera --out after.json          # profile and extrapolate
  bench/roofline.py --compare before.json after.json                      # the before/after table
"""
import argparse
import json
import subprocess
import sys

# The models of scripts/gpu_check.sh's bench step, their image size and bench batch.
MODELS = {"xcit_small_12_p16_224": (224, 128), "cait_s24_224": (224, 64), "coat_lite_small": (224, 128)}

# What the first H100 run captured as one CUDA Graph per training step, bf16 autocast, at the bench
# batch (docs/gpu-report-2026-11-27.md), at the commit before issue 46: the counts to reconcile with.
H100_GRAPH_NODES = {"xcit_small_12_p16_224": (128, 10778), "cait_s24_224": (64, 9713), "coat_lite_small": (128, 10391)}

COUNTS = ("launches", "library_calls", "memory_ops")


def profile(tessera, model, img, batch, amp, activations):
    cmd = [tessera, "bench", "--model", model, "--device", "cuda", "--mode", "train", "--batch", str(batch),
           "--img-size", str(img), "--steps", "1", "--seconds", "0", "--warmup", "1", "--cuda-graph",
           "--profile", "--json"]
    if amp != "off":
        cmd += ["--amp", amp, "--amp-activations", activations]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return json.loads(out)


def line(b1, v1, b2, v2, target):
    return v1 + (v2 - v1) * (target - b1) / (b2 - b1)


def extrapolate(small, large, target):
    """Per kernel row (phase, kernel), every term carried along the line through the two batches."""
    b1, b2 = small["batch"], large["batch"]
    zero = {"launches": 0, "library_calls": 0, "memory_ops": 0, "bytes": 0, "model_compute_ms": 0,
            "model_memory_ms": 0, "model_launch_ms": 0, "calls": 0}
    rows1 = {(r["phase"], r["kernel"]): r for r in small["profile"] if "launches" in r}
    rows2 = {(r["phase"], r["kernel"]): r for r in large["profile"] if "launches" in r}
    rows = []
    for key in sorted(set(rows1) | set(rows2)):
        r1, r2 = rows1.get(key, zero), rows2.get(key, zero)
        at = lambda name: max(0.0, line(b1, r1[name], b2, r2[name], target))
        compute, memory, launch = at("model_compute_ms"), at("model_memory_ms"), at("model_launch_ms")
        rows.append({"phase": key[0], "kernel": key[1], "calls": at("calls"), "launches": at("launches"),
                     "library_calls": at("library_calls"), "memory_ops": at("memory_ops"),
                     "launches_at": [r1["launches"], r2["launches"]], "bytes": at("bytes"),
                     "model_ms": max(compute, memory) + launch,
                     "compute_ms": compute, "memory_ms": memory, "launch_ms": launch})
    rows.sort(key=lambda r: -r["model_ms"])
    step1, step2 = small["device_per_step"], large["device_per_step"]
    nodes = [small["cuda_graph"].get("nodes"), large["cuda_graph"].get("nodes")]
    return {"model": large["model"], "img_size": large["img_size"], "batch": target,
            "profiled_batches": [b1, b2], "gpu": step2["roofline_gpu"],
            "kernel_calls": line(b1, step1["kernel_calls"], b2, step2["kernel_calls"], target),
            **{name: line(b1, step1[name], b2, step2[name], target) for name in COUNTS},
            "launches_at": [step1["launches"], step2["launches"]],
            "outside_kernel_calls_at": [step1["outside_kernel_calls"], step2["outside_kernel_calls"]],
            "graph_nodes_at": nodes,
            "graph_nodes": line(b1, nodes[0], b2, nodes[1], target) if None not in nodes else None,
            "bytes": sum(r["bytes"] for r in rows), "model_ms": sum(r["model_ms"] for r in rows), "rows": rows}


def report(r):
    b1, b2 = r["profiled_batches"]
    print(f"{r['model']}: {r['launches']:.0f} launches ({r['library_calls']:.0f} library calls, "
          f"{r['memory_ops']:.0f} memory ops), {r['bytes'] / 1e9:.2f} GB, {r['model_ms']:.2f} ms per step at batch "
          f"{r['batch']} ({r['gpu']}); profiled {r['launches_at'][0]:.0f} / {r['launches_at'][1]:.0f} launches at "
          f"batch {b1} / {b2}, the graph {r['graph_nodes_at'][0]} / {r['graph_nodes_at'][1]} nodes", flush=True)
    for launches, nodes in zip(r["launches_at"], r["graph_nodes_at"]):
        if nodes is None or abs(launches - nodes) > 0.01 * nodes:
            print(f"roofline.py: {r['model']}: the profile's {launches} launches differ from the graph's {nodes} "
                  "nodes by more than 1%", file=sys.stderr)
    if r["launches_at"][0] != r["launches_at"][1]:
        for row in r["rows"]:
            if row["launches_at"][0] != row["launches_at"][1]:
                print(f"  grows with the batch: {row['phase']} {row['kernel']}: {row['launches_at'][0]:.0f} at "
                      f"batch {b1}, {row['launches_at'][1]:.0f} at {b2}")
    if r["model"] in H100_GRAPH_NODES and H100_GRAPH_NODES[r["model"]][0] == r["batch"]:
        measured = H100_GRAPH_NODES[r["model"]][1]
        print(f"  the H100 captured {measured} nodes at batch {r['batch']} before issue 46; the instrument "
              f"says {r['launches']:.0f} ({r['launches'] / measured - 1:+.1%})")


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
            print(f"| {r['phase']} | {r['kernel']} | {r['launches']:.0f} | {r['bytes'] / 1e9:.2f} | "
                  f"{r['compute_ms']:.2f} | {r['memory_ms']:.2f} | {r['launch_ms']:.2f} | {r['model_ms']:.2f} |")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--tessera", default="build/bin/tessera", help="an emulator (or GPU) build's tessera")
    p.add_argument("--models", nargs="*", default=list(MODELS))
    # Not batch 1: there some reductions over a size-1 dim take other paths (views, fewer launches).
    p.add_argument("--batches", nargs=2, type=int, default=[2, 4], help="the two batches profiled")
    p.add_argument("--target-batch", type=int, help="default: each model's bench batch (128, CaiT 64)")
    p.add_argument("--img-size", type=int, help="default: each model's own (224)")
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
        img, bench_batch = MODELS.get(model, (224, 128))
        img = args.img_size or img
        small, large = (profile(args.tessera, model, img, b, args.amp, args.amp_activations) for b in args.batches)
        r = extrapolate(small, large, args.target_batch or bench_batch)
        report(r)
        results.append(r)
        if args.out:  # after each model, so an interrupted run keeps what it measured
            with open(args.out, "w") as f:
                json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
