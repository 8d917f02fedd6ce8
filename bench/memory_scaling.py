#!/usr/bin/env python3
"""XCiT's memory against the number of tokens (XCiT Table D.5: cross-covariance attention is linear
in the tokens, so memory should be too), at batch 1 and image sizes 224 to 1024, in inference and
training: the allocator's peak of tensor bytes during a step on the CPU (float32), and on the SIMT
emulator (bf16 autocast) the same peak with the instrument's bytes moved per step (autograd/
roofline.h: every device kernel's operand bytes; a model of the traffic, not a measurement).

  bench/memory_scaling.py --tessera build/bin/tessera --out scaling.jsonl        # CPU and emulator
  bench/memory_scaling.py --table scaling.jsonl                                  # the markdown table

The emulator runs every kernel of a step on the host: at 1024x1024 (4096 tokens) a training step
takes minutes. Runs are one at a time (each `tessera bench` process uses its own threads).
"""
import argparse
import json
import subprocess

SIZES = (224, 384, 512, 768, 1024)


def bench(tessera, model, device, mode, img):
    cmd = [tessera, "bench", "--model", model, "--device", device, "--mode", mode, "--batch", "1",
           "--img-size", str(img), "--warmup", "0", "--steps", "1", "--seconds", "0", "--json"]
    if device == "cpu":
        cmd += ["--threads", "1"]
    else:  # the instrument: bf16 as a GPU would run, every kernel counted
        cmd += ["--amp", "bf16", "--profile"]
    out = json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)
    row = {"model": model, "device": device, "mode": mode, "img": img, "tokens": (img // 16) ** 2,
           "step_peak_mib": out["step_tensor_peak_mib"]}
    if "device_per_step" in out:
        row["bytes"] = out["device_per_step"]["bytes"]
    return row


def table(path):
    rows = [json.loads(line) for line in open(path)]
    key = {(r["device"], r["mode"], r["img"]): r for r in rows}
    print("| image | tokens N | CPU inference peak MiB (KiB/token) | CPU training peak MiB (KiB/token) "
          "| emulator inference: peak MiB, GB moved (KB/token) | emulator training: peak MiB, GB moved (KB/token) |")
    print("|---:|---:|---|---|---|---|")
    for img in sorted({r["img"] for r in rows}):
        n = (img // 16) ** 2
        cells = []
        for device, mode in (("cpu", "infer"), ("cpu", "train"), ("cuda", "infer"), ("cuda", "train")):
            r = key.get((device, mode, img))
            if r is None:
                cells.append("not measured")
            elif "bytes" in r:
                cells.append(f"{r['step_peak_mib']:.1f}, {r['bytes'] / 1e9:.3f} ({r['bytes'] / 1e3 / n:.0f})")
            else:
                cells.append(f"{r['step_peak_mib']:.1f} ({r['step_peak_mib'] * 1024 / n:.1f})")
        print(f"| {img} | {n} | " + " | ".join(cells) + " |")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--tessera", default="build/bin/tessera", help="a build with the emulator (or a GPU) for cuda")
    p.add_argument("--model", default="xcit_small_12_p16_224")
    p.add_argument("--sizes", nargs="*", type=int, default=list(SIZES))
    p.add_argument("--devices", nargs="*", default=["cpu", "cuda"])
    p.add_argument("--out", help="append one JSON line per run here")
    p.add_argument("--table", metavar="JSONL", help="print the markdown table of a finished run")
    args = p.parse_args()
    if args.table:
        table(args.table)
        return
    for device in args.devices:
        for img in args.sizes:
            for mode in ("infer", "train"):
                row = bench(args.tessera, args.model, device, mode, img)
                print(json.dumps(row), flush=True)
                if args.out:  # after each run, so an interrupted sweep keeps what it measured
                    with open(args.out, "a") as f:
                        f.write(json.dumps(row) + "\n")


if __name__ == "__main__":
    main()
