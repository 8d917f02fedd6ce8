#!/usr/bin/python3
"""Loss curves of the same training run on two devices, side by side: reads `tessera train` logs
(--log-interval 1, one "Train: E [  s/N ...]  loss X (mean)" line per step) named
<model>.<device>.log and prints a markdown table per model: the loss at a few steps on each device
and the largest relative difference over all steps. Used by scripts/gpu_check.sh's train stage.

usage: bench/compare_loss_curves.py LOG...
"""
import re
import sys
from collections import defaultdict

STEP = re.compile(r"Train: \d+ \[\s*(\d+)/\d+ [^\]]*\]\s+loss ([0-9.eE+-]+|nan|inf)")


def losses(path):
    out = {}
    with open(path, errors="replace") as f:
        for line in f:
            m = STEP.search(line)
            if m:
                out[int(m.group(1))] = float(m.group(2))
    return out


def main():
    runs = defaultdict(dict)  # model -> device -> {step: loss}
    for path in sys.argv[1:]:
        name = path.rsplit("/", 1)[-1]
        if not name.endswith(".log") or name.count(".") < 2:
            continue
        model, device = name[:-4].rsplit(".", 1)
        runs[model][device] = losses(path)
    for model, by_device in sorted(runs.items()):
        devices = sorted(by_device)
        print(f"### {model}\n")
        if len(devices) != 2 or not all(by_device[d] for d in devices):
            print(f"missing or empty logs for {model}: {', '.join(devices)}\n")
            continue
        a, b = (by_device[d] for d in devices)
        steps = sorted(set(a) & set(b))
        worst = max(abs(a[s] - b[s]) / max(abs(b[s]), 1e-12) for s in steps)
        print(f"| step | {devices[0]} | {devices[1]} |\n|---:|---:|---:|")
        for s in [x for x in steps if x in (1, 2, 5, 10, 20, 30, 40, 50) or x == steps[-1]]:
            print(f"| {s} | {a[s]:.5f} | {b[s]:.5f} |")
        print(f"\nlargest relative difference over {len(steps)} steps: {worst:.2e}\n")


if __name__ == "__main__":
    main()
