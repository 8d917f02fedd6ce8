#!/usr/bin/env python3
"""Markdown tables of scripts/gpu_check.sh's perf step, from what its runs wrote.

  bench/perf_tables.py profiles PROFILE.json ...   per model: where a training step's time goes
  bench/perf_tables.py levers bench.jsonl          per model: images/s with each lever flipped against all on
                                                   (tessera bench --lever-sweep: one process per model)

A profile is `tessera bench --profile --json`: per (phase, kernel) row the device time (CUDA events
around each call, read at the end; autograd/profiler.h), the host's time launching it, what it
queued, and the H100 roofline model's time beside the measurement.
"""
import json
import sys

TOP = 12


def profiles(paths):
    for path in paths:
        try:
            p = json.load(open(path))
        except (OSError, ValueError) as e:
            print(f"- {path}: no profile ({e})\n")
            continue
        step = p.get("device_per_step", {})
        rows = [r for r in p.get("profile", []) if "launches" in r]
        device_ms = sum(r["total_ms"] for r in rows)
        wall = p.get("profile_wall_ms", 0)
        print(f"**{p['model']}**, batch {p['batch']} at {p['img_size']} px on {p['device']}: "
              f"{p['images_per_s']} images/s unprofiled; the profiled step took {wall:.1f} ms, of which the device "
              f"ran ops for {device_ms:.1f} ms ({step.get('timing', '?')}); it queued {step.get('launches', '?')} "
              f"(kernels {step.get('kernels', '?')}, library calls {step.get('library_calls', '?')}, "
              f"memory ops {step.get('memory_ops', '?')}); roofline model {step.get('roofline_ms', '?')} ms\n")
        print("| phase | kernel | calls | queued | device ms | share of step | host ms | roofline ms |")
        print("|---|---|---:|---:|---:|---:|---:|---:|")
        for r in sorted(rows, key=lambda r: -r["total_ms"])[:TOP]:
            print(f"| {r['phase']} | {r['kernel']} | {r['calls']} | {r['launches']} | {r['total_ms']:.3f} | "
                  f"{r['share']:.1%} | {r.get('host_ms', 0):.3f} | {r['model_ms']:.3f} |")
        print()


def levers(path):
    sweeps = [json.loads(line) for line in open(path)]
    sweeps = [r for r in sweeps if r.get("side") == "tessera-levers"]
    if not sweeps:
        print("(no lever sweeps yet)")
        return
    for r in sweeps:
        if "lever_sweep" not in r:
            print(f"- {r['model']}: failed ({r.get('error', '?')})\n")
            continue
        runs = r["lever_sweep"]
        base = runs[0]["images_per_s"]
        print(f"| {r['model']}, batch {r['batch']} | images/s | against all on (first) |")
        print("|---|---:|---:|")
        for run in runs:
            print(f"| {run['lever']} | {run['images_per_s']:.1f} | {run['images_per_s'] / base:.3f}x |")
        print()


def main():
    if len(sys.argv) < 2 or sys.argv[1] not in ("profiles", "levers"):
        sys.exit(__doc__)
    if sys.argv[1] == "profiles":
        profiles(sys.argv[2:])
    else:
        levers(sys.argv[2])


if __name__ == "__main__":
    main()
