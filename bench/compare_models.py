#!/usr/bin/python3
"""Model benchmark, Tessera against timm on PyTorch, run by scripts/bench_models.sh.

For every (model, mode, thread count) the two sides run one after the other, never at the same
time, and alternate round by round (Tessera, PyTorch, Tessera, PyTorch, ...): these 2-core VMs
drift by up to 1.8x over minutes, and alternating spreads the drift over both sides. Each side's
best round is kept. Prints a markdown table of images/s and peak resident memory with the ratios,
and writes every measurement as one JSON line (--jsonl).

UFO-ViT has no timm implementation; its rows compare with xcit_tiny_24_p16_224, the XCiT of the
same width and depth.
"""
import argparse
import json
import os
import platform
import subprocess
import sys
import time

DEFAULT_MODELS = ["xcit_nano_12_p16_224", "xcit_tiny_12_p16_224", "xcit_small_12_p16_224", "cait_xxs24_224",
                  "coat_lite_tiny", "coat_lite_small", "ufo_vit_t"]


def cpu_name():
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor()


def run_json(cmd, env):
    """The JSON line a benchmark printed, or None when it could not run the case (timm's CoaT cannot
    checkpoint its blocks); what it said goes to stderr."""
    r = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if r.returncode != 0:
        print(f"{' '.join(cmd[:4])}: {r.stderr.strip().splitlines()[-1] if r.stderr.strip() else r.returncode}",
              file=sys.stderr)
        return None
    return json.loads(r.stdout.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("models", nargs="*", default=DEFAULT_MODELS)
    ap.add_argument("--tessera", required=True, help="the tessera binary")
    ap.add_argument("--threads", default="1 2", help="thread counts, e.g. '1 2'")
    ap.add_argument("--modes", default="infer train")
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--seconds", type=float, default=10.0, help="at least this long per measurement")
    ap.add_argument("--rounds", type=int, default=2, help="measurements per side, alternated; the best is kept")
    ap.add_argument("--grad-checkpointing", action="store_true", help="both sides checkpoint their blocks (train)")
    ap.add_argument("--torch-env", default="", help="extra environment for PyTorch only, e.g. LD_PRELOAD=...")
    ap.add_argument("--jsonl", default="", help="also append every measurement here")
    args = ap.parse_args()

    torch_extra = dict(kv.split("=", 1) for kv in args.torch_env.split() if kv)
    here = os.path.dirname(os.path.abspath(__file__))
    log = open(args.jsonl, "a") if args.jsonl else None
    print(f"{cpu_name()}, {os.cpu_count()} cores; batch {args.batch} at 224x224; >= {args.seconds:g} s per "
          f"measurement, best of {args.rounds} alternated rounds per side; {time.strftime('%Y-%m-%d', time.gmtime())}")
    if torch_extra:
        print(f"PyTorch environment: {' '.join(f'{k}={v}' for k, v in torch_extra.items())}")
    print()
    print("| model | mode | threads | Tessera img/s | PyTorch img/s | speed ratio | Tessera peak MiB | "
          "PyTorch peak MiB | memory ratio |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
    for model in args.models:
        ref = "xcit_tiny_24_p16_224" if model.startswith("ufo_vit") else model
        for mode in args.modes.split():
            for threads in [int(t) for t in args.threads.split()]:
                env = dict(os.environ, OMP_NUM_THREADS=str(threads), MKL_NUM_THREADS=str(threads),
                           OPENBLAS_NUM_THREADS=str(threads), TESSERA_NUM_THREADS=str(threads))
                common = ["--batch", str(args.batch), "--mode", mode, "--seconds", str(args.seconds),
                          "--threads", str(threads)] + (["--grad-checkpointing"] if args.grad_checkpointing else [])
                ours = [args.tessera, "bench", "--model", model, "--json"] + common
                theirs = [sys.executable, os.path.join(here, "bench_models.py"), "--model", ref] + common
                best = {"tessera": None, "pytorch": None}
                for _ in range(args.rounds):
                    for side, cmd, side_env in (("tessera", ours, env), ("pytorch", theirs, dict(env, **torch_extra))):
                        r = run_json(cmd, side_env)
                        if r is None:
                            continue
                        r.update(side=side, threads=threads, mode=mode, model=model)
                        if log:
                            log.write(json.dumps(r) + "\n")
                            log.flush()
                        if best[side] is None or r["images_per_s"] > best[side]["images_per_s"]:
                            best[side] = r
                t, p = best["tessera"], best["pytorch"]
                label = model if ref == model else f"{model} (vs {ref})"
                cells = [f"{t['images_per_s']:.2f}" if t else "n/a", f"{p['images_per_s']:.2f}" if p else "n/a",
                         f"{t['images_per_s'] / p['images_per_s']:.2f}x" if t and p else "-",
                         f"{t['peak_memory_mib']:.0f}" if t else "n/a", f"{p['peak_memory_mib']:.0f}" if p else "n/a",
                         f"{t['peak_memory_mib'] / p['peak_memory_mib']:.2f}x" if t and p else "-"]
                print(f"| {label} | {mode} | {threads} | " + " | ".join(cells) + " |", flush=True)


if __name__ == "__main__":
    main()
