#!/usr/bin/python3
"""How inference time and memory grow with the image, run by scripts/bench_scaling.sh.

For each model and resolution, `tessera bench --mode infer --batch 1` (model built at that size:
XCiT's and CaiT's position encodings follow the image). Prints a markdown table with the tokens,
time per image, the peak of tensor bytes and the process's resident peak, and each row's growth
against the first resolution, beside the growth of the tokens N and of N^2: XCiT's
cross-covariance attention is linear in N (El-Nouby et al., 2021, Sec. 3), CaiT's self-attention
quadratic (its maps are N x N).
"""
import argparse
import json
import subprocess


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tessera", required=True)
    ap.add_argument("--models", default="xcit_nano_12_p16_224 cait_xxs24_224")
    ap.add_argument("--sizes", default="224 384 512 768")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--seconds", type=float, default=5.0)
    args = ap.parse_args()
    print("| model | image | tokens N | ms / image | time growth | N growth | N² growth | tensor peak MiB | "
          "resident peak MiB |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for model in args.models.split():
        first = None
        for size in [int(s) for s in args.sizes.split()]:
            out = subprocess.run([args.tessera, "bench", "--model", model, "--img-size", str(size), "--batch", "1",
                                  "--mode", "infer", "--threads", str(args.threads), "--seconds", str(args.seconds),
                                  "--json"], check=True, capture_output=True, text=True).stdout
            r = json.loads(out)
            tokens = (size // 16) ** 2
            ms = 1000.0 / r["images_per_s"]
            if first is None:
                first = (tokens, ms)
            n = tokens / first[0]
            print(f"| {model} | {size} | {tokens} | {ms:.1f} | {ms / first[1]:.2f}x | {n:.2f}x | {n * n:.2f}x | "
                  f"{r['tensor_peak_mib']:.1f} | {r['peak_memory_mib']:.0f} |", flush=True)


if __name__ == "__main__":
    main()
