#!/usr/bin/python3
"""Tessera in bfloat16 against Tessera in float32 on the CPU (issue 57): `tessera bench` of each
model in each configuration, alternated round by round.

Configurations (--configs, comma-separated; default: f32,bf16):
  f32            float32 (no --amp)
  bf16           --amp bf16 (activations in bfloat16 between ops: --amp-activations low)
  bf16-act32     --amp bf16 --amp-activations float32 (only the GEMMs and convolutions in bfloat16)
  bf16-unfused   --amp bf16 with the fused attention and depthwise convolution + GELU ops off
                 (TESSERA_FUSED_XCA=0 TESSERA_FUSED_TALKING_HEADS=0 TESSERA_FUSED_FACTOR_ATTENTION=0
                 TESSERA_FUSED_DEPTHWISE_GELU=0): what the fused kernels buy in bfloat16
  bf16-portable  --amp bf16 with TESSERA_CPU_BF16_NATIVE=0: the portable path a CPU without bfloat16
                 instructions runs (the same results, no AVX-512 BF16 conversions or GEMMs)

Each measurement is `tessera bench --model M --batch B --threads T --mode MODE --json` in a fresh
process, the configurations one after the other and never at the same time (these VMs drift by up to
1.8x over minutes), `--rounds` times; `--wait-idle 0.1` first waits until at most 10% of the CPU is
busy. Reported per (model, mode, configuration): images/s best (median), the process's peak resident
memory and the step's peak tensor memory, and each configuration's ratio to the first one's (best
and median). The JSON lines go to --jsonl; --markdown prints the table.

  /usr/bin/python3 bench/precision_compare.py --modes infer,train --rounds 3 --seconds 8 --wait-idle 0.1 \\
      --markdown --jsonl build/bench-results/precision-$(date -u +%Y%m%dT%H%M%S).jsonl

(4 models x 2 modes x 2 configurations x 3 rounds x ~10 s: about 8 minutes.)
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, HERE)
from openvino_compare import cpu_name, wait_idle  # noqa: E402  (the same CPU name and idle wait)

DEFAULT_MODELS = ["xcit_nano_12_p16_224", "xcit_small_12_p16_224", "cait_xxs24_224", "coat_lite_tiny"]
UNFUSED = {"TESSERA_FUSED_XCA": "0", "TESSERA_FUSED_TALKING_HEADS": "0", "TESSERA_FUSED_FACTOR_ATTENTION": "0",
           "TESSERA_FUSED_DEPTHWISE_GELU": "0"}
CONFIGS = {
    "f32": ([], {}),
    "bf16": (["--amp", "bf16"], {}),
    "bf16-act32": (["--amp", "bf16", "--amp-activations", "float32"], {}),
    "bf16-unfused": (["--amp", "bf16"], UNFUSED),
    "bf16-portable": (["--amp", "bf16"], {"TESSERA_CPU_BF16_NATIVE": "0"}),
}


def measure(args, model, mode, config):
    flags, env_extra = CONFIGS[config]
    cmd = [args.tessera, "bench", "--model", model, "--batch", str(args.batch), "--threads", str(args.threads),
           "--mode", mode, "--seconds", str(args.seconds), "--steps", str(args.steps), "--warmup", str(args.warmup),
           "--json"] + flags
    env = dict(os.environ, OMP_NUM_THREADS=str(args.threads), TESSERA_NUM_THREADS=str(args.threads), **env_extra)
    r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=args.timeout)
    if r.returncode != 0 or not r.stdout.strip():
        print(f"[precision_compare] {model} {mode} {config}: exit {r.returncode}: {r.stderr.strip()[-300:]}",
              file=sys.stderr)
        return None
    return json.loads(r.stdout.strip().splitlines()[-1])


def summarize(runs, configs):
    rows = []
    for key in sorted({(r["model"], r["mode"]) for r in runs}, key=lambda k: (k[0], k[1])):
        per = {}
        for c in configs:
            ips = [r["images_per_s"] for r in runs if (r["model"], r["mode"], r["config"]) == (*key, c)]
            rec = [r for r in runs if (r["model"], r["mode"], r["config"]) == (*key, c)]
            if ips:
                per[c] = {"best": max(ips), "median": round(statistics.median(ips), 3), "rounds": len(ips),
                          "peak_memory_mib": max(x["peak_memory_mib"] for x in rec),
                          "step_tensor_peak_mib": max(x.get("step_tensor_peak_mib", 0) for x in rec),
                          "instruction_set": rec[0].get("instruction_set")}
        base = per.get(configs[0])
        for c, v in per.items():
            if base:
                v["ratio_best"] = round(v["best"] / base["best"], 3)
                v["ratio_median"] = round(v["median"] / base["median"], 3)
                v["memory_ratio"] = round(v["step_tensor_peak_mib"] / base["step_tensor_peak_mib"], 3) \
                    if base["step_tensor_peak_mib"] else None
        rows.append({"kind": "summary", "model": key[0], "mode": key[1], "configs": per})
    return rows


def table(header, rows, configs):
    out = [f"{header['cpu']}, {header['threads']} threads, batch {header['batch']} at 224x224; >= "
           f"{header['seconds']:g} s per measurement, {header['rounds']} alternated rounds; {header['date']}; "
           f"{header['tessera_version'].splitlines()[0]} ({header['repo_head']})", ""]
    cols = " | ".join(f"{c} img/s best (median)" for c in configs)
    ratios = " | ".join(f"{c} / {configs[0]}" for c in configs[1:])
    mems = " | ".join(f"{c} step MiB" for c in configs)
    out.append(f"| model | mode | {cols} | {ratios} | {mems} |")
    out.append("|---|---|" + "---:|" * (2 * len(configs) + len(configs) - 1))
    for r in rows:
        p = r["configs"]
        cell = lambda c: f"{p[c]['best']:.2f} ({p[c]['median']:.2f})" if c in p else "n/a"  # noqa: E731
        ratio = lambda c: f"**{p[c]['ratio_best']:.2f}x** ({p[c]['ratio_median']:.2f}x)" \
            if c in p and "ratio_best" in p[c] else "n/a"  # noqa: E731
        mem = lambda c: f"{p[c]['step_tensor_peak_mib']:.0f}" if c in p else "n/a"  # noqa: E731
        out.append(f"| {r['model']} | {r['mode']} | " + " | ".join(cell(c) for c in configs) + " | " +
                   " | ".join(ratio(c) for c in configs[1:]) + " | " + " | ".join(mem(c) for c in configs) + " |")
    return "\n".join(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    ap.add_argument("models", nargs="*", default=DEFAULT_MODELS)
    ap.add_argument("--tessera", default=os.path.join(REPO, "build", "bin", "tessera"))
    ap.add_argument("--configs", default="f32,bf16", help="comma-separated: " + ", ".join(CONFIGS))
    ap.add_argument("--modes", default="infer,train", help="infer, train or both")
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--seconds", type=float, default=8.0)
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--wait-idle", type=float, default=0.0, metavar="FRACTION")
    ap.add_argument("--wait-idle-max", type=float, default=600.0)
    ap.add_argument("--timeout", type=float, default=900)
    ap.add_argument("--markdown", action="store_true")
    ap.add_argument("--jsonl", default="")
    ap.add_argument("--table", metavar="RUN.jsonl", help="print the table of a saved run and exit")
    args = ap.parse_args()
    configs = args.configs.split(",")
    for c in configs:
        if c not in CONFIGS:
            raise SystemExit(f"unknown configuration '{c}' (expected one of {', '.join(CONFIGS)})")
    if args.table:
        header, rows = None, []
        with open(args.table) as f:
            for line in f:
                r = json.loads(line)
                if r["kind"] == "header":
                    header, rows = r, []
                elif r["kind"] == "summary":
                    rows.append(r)
        print(table(header, rows, header["configs"]))
        return 0
    jsonl = open(args.jsonl, "a") if args.jsonl else None
    if args.jsonl and os.path.dirname(args.jsonl):
        os.makedirs(os.path.dirname(args.jsonl), exist_ok=True)

    def emit(rec):
        if jsonl:
            jsonl.write(json.dumps(rec) + "\n")
            jsonl.flush()
        if not args.markdown:
            print(json.dumps(rec), flush=True)

    version = subprocess.run([args.tessera, "--version"], capture_output=True, text=True).stdout.strip()
    head = subprocess.run(["git", "-C", REPO, "rev-parse", "--short", "HEAD"], capture_output=True,
                          text=True).stdout.strip()
    header = {"kind": "header", "cpu": cpu_name(), "threads": args.threads, "batch": args.batch,
              "seconds": args.seconds, "rounds": args.rounds, "configs": configs,
              "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "tessera_version": version,
              "repo_head": head}
    emit(header)
    runs = []
    for model in args.models:
        for mode in args.modes.split(","):
            for rnd in range(args.rounds):
                for config in configs:
                    busy, _ = wait_idle(args)
                    r = measure(args, model, mode, config)
                    if r is None:
                        continue
                    r.update(kind="bench", model=model, mode=mode, config=config, round=rnd + 1, busy_before=busy)
                    runs.append(r)
                    emit(r)
                    print(f"[precision_compare] {model} {mode} {config} round {rnd + 1}: {r['images_per_s']:.2f} "
                          f"img/s (busy before {busy:.0%})", file=sys.stderr)
    rows = summarize(runs, configs)
    for r in rows:
        emit(r)
    if args.markdown:
        print(table(header, rows, configs))
    return 0


if __name__ == "__main__":
    sys.exit(main())
