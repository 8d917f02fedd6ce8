#!/usr/bin/python3
"""Tessera and timm on PyTorch with another process busy on one core (issue 60): does asking for
every core still pay when one of them is taken?

For each model and mode (inference, training step; batch 8 at 224x224 by default) and each
condition, idle and busy, it times every side, each in a fresh process:

  tessera-2, tessera-1   `tessera bench --threads 2 / 1 --json` (--tessera BIN);
  before-2, before-1     the same with another build (--before BIN, optional): before and after a
                         change, in the same run;
  timm-2, timm-1         bench/bench_models.py (timm on Debian's PyTorch 1.13, torch.set_num_threads
                         2 / 1), which times as `tessera bench` times.

"busy" is one process of this script's own making that spins on the CPU (a Python loop, no
threads) from just before a measurement to just after it ("busy2": two of them, every core of a
2-core machine); it ends itself at the measurement's
time limit (20 x --seconds + 2 min) at the latest and is killed when this script exits. "idle" measurements start
only once at most --wait-idle of the CPU was busy for half a second (/proc/stat), up to a minute.

Sides and conditions alternate round by round (these 2-core VMs drift by up to 1.8x over minutes):
round r runs idle then busy, each over every side, the order of the sides reversed in odd rounds.
timm's sides run in the first --timm-rounds rounds and the --timm-conditions only (by default one
round, idle and busy: under load its training steps take a minute each, and its collapse is far
beyond the drift).
Reported per model, mode, condition and side: images/s, best and median over the rounds; and per
backend the ratio a user weighs, 2 threads / 1 thread under the same condition (of the medians), and
busy 2 threads / idle 2 threads.

  /usr/bin/python3 bench/under_load.py --rounds 2 --seconds 4 --conditions idle,busy,busy2 \\
      --before OLD/bin/tessera --markdown --jsonl build/bench-results/under-load-$(date -u +%Y%m%dT%H%M%S).jsonl

About 30 minutes for the three default models, both modes, these options. timm needs
PYTHONPATH=~/.cache/tessera/timm (pip install --no-deps --target; scripts/bench_models.sh installs
it, with libjemalloc2 and libopenblas0-openmp); PyTorch runs as scripts/bench_models.sh runs it:
OpenBLAS's OpenMP build, OPENBLAS_CORETYPE as scripts/openblas_coretype.sh sets it, jemalloc.
"""
import argparse
import atexit
import json
import os
import statistics
import subprocess
import sys
import time

from proc_status import cpu_busy

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_MODELS = ["xcit_nano_12_p16_224", "cait_xxs24_224", "coat_lite_tiny"]
JEMALLOC = "/usr/lib/x86_64-linux-gnu/libjemalloc.so.2"
SPIN = "import time\nend = time.time() + {limit}\nwhile time.time() < end:\n    pass\n"
BUSY_CORES = {"idle": 0, "busy": 1, "busy2": 2}
_spinners = []


def wait_idle(limit, most=60.0):
    start = time.time()
    busy = cpu_busy()
    while busy > limit and time.time() - start < most:
        busy = cpu_busy()
    return busy


def start_spinner(seconds):
    p = subprocess.Popen([sys.executable, "-c", SPIN.format(limit=seconds)])
    _spinners.append(p)
    time.sleep(0.5)  # let the scheduler place it
    return p


def stop_spinners():
    for p in _spinners:
        if p.poll() is None:
            p.kill()
            p.wait()
    _spinners.clear()


def openblas_coretype():
    with open("/proc/cpuinfo") as f:
        flags = f.read()
    if " avx512f" in flags:
        return "SkylakeX"
    if " avx2" in flags:
        return "Haswell"
    return None


def command(side, args, model, mode):
    backend, threads = side.rsplit("-", 1)
    common = ["--model", model, "--batch", str(args.batch), "--mode", mode, "--threads", threads,
              "--seconds", str(args.seconds), "--steps", str(args.steps)]
    env = dict(os.environ, OMP_NUM_THREADS=threads)
    if backend == "timm":
        env["PYTHONPATH"] = args.timm_path + os.pathsep + HERE
        coretype = openblas_coretype()
        if coretype:
            env["OPENBLAS_CORETYPE"] = coretype
        # As scripts/bench_models.sh runs it: OpenBLAS's OpenMP build, jemalloc.
        env["LD_LIBRARY_PATH"] = "/usr/lib/x86_64-linux-gnu/openblas-openmp"
        if os.path.exists(JEMALLOC):
            env["LD_PRELOAD"] = JEMALLOC
        return ["/usr/bin/python3", os.path.join(HERE, "bench_models.py")] + common, env
    binary = args.tessera if backend == "tessera" else args.before
    env.pop("TESSERA_NUM_THREADS", None)
    return [binary, "bench", "--json"] + common, env


def measure(side, args, model, mode):
    cmd, env = command(side, args, model, mode)
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=args.seconds * 20 + 120)
    if out.returncode != 0:
        raise SystemExit(f"{side} failed on {model} ({mode}):\n{out.stderr[-2000:]}")
    return json.loads(out.stdout[out.stdout.index("{"):])


def summarise(records):
    groups = {}
    for r in records:
        groups.setdefault((r["model"], r["mode"], r["condition"], r["side"]), []).append(r["images_per_s"])
    return {k: (max(v), statistics.median(v)) for k, v in groups.items()}


def markdown(records, sides):
    s = summarise(records)
    backends = []
    for side in sides:
        b = side.rsplit("-", 1)[0]
        if b not in backends:
            backends.append(b)
    head = "| model | mode | condition | " + " | ".join(sides) + " | " + \
        " | ".join(f"**{b} 2 / 1 thread**" for b in backends) + " |"
    lines = [head, "|" + "---|" * (3 + len(sides) + len(backends))]
    for model, mode in dict.fromkeys((r["model"], r["mode"]) for r in records):
        for condition in BUSY_CORES:
            if not any(r["condition"] == condition and r["model"] == model for r in records):
                continue
            cells = []
            for side in sides:
                best, med = s.get((model, mode, condition, side), (None, None))
                cells.append(f"{best:.1f} ({med:.1f})" if best else "-")
            ratios = []
            for b in backends:
                two = s.get((model, mode, condition, f"{b}-2"))
                one = s.get((model, mode, condition, f"{b}-1"))
                ratios.append(f"**{two[1] / one[1]:.2f}x**" if two and one else "-")
            lines.append(f"| {model} | {mode} | {condition} | " + " | ".join(cells) + " | " + " | ".join(ratios) + " |")
    lines.append("")
    lines.append("Images/s, best (median) of the rounds; the ratios are of the medians. Busy over idle at "
                 "2 threads (medians): " + ", ".join(
                     f"{m} {mo} {b} {s[(m, mo, 'busy', b + '-2')][1] / s[(m, mo, 'idle', b + '-2')][1]:.2f}x"
                     for m, mo in dict.fromkeys((r["model"], r["mode"]) for r in records) for b in backends
                     if (m, mo, 'busy', b + '-2') in s and (m, mo, 'idle', b + '-2') in s))
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("models", nargs="*", default=DEFAULT_MODELS)
    ap.add_argument("--modes", default="infer,train")
    ap.add_argument("--conditions", default="idle,busy",
                    help="idle, busy (one core busy), busy2 (two cores busy), comma-separated")
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--tessera", default=os.path.join(HERE, "..", "build", "bin", "tessera"))
    ap.add_argument("--before", help="another tessera binary, timed beside --tessera (before/after a change)")
    ap.add_argument("--no-timm", action="store_true", help="leave out timm's sides")
    ap.add_argument("--timm-conditions", default="idle,busy",
                    help="the conditions timm's sides run in (under busy2 a training step takes minutes)")
    ap.add_argument("--timm-rounds", type=int, default=1,
                    help="the rounds timm's sides run in (its collapse under load is far beyond the VMs' drift)")
    ap.add_argument("--timm-path", default=os.path.expanduser("~/.cache/tessera/timm"))
    ap.add_argument("--wait-idle", type=float, default=0.1)
    ap.add_argument("--jsonl", help="append every measurement to this file")
    ap.add_argument("--markdown", action="store_true", help="print the table as markdown at the end")
    ap.add_argument("--table", help="print the table of a saved --jsonl run and exit")
    args = ap.parse_args()
    if args.table:
        with open(args.table) as f:
            records = [json.loads(line) for line in f if line.strip()]
        sides = list(dict.fromkeys(r["side"] for r in records))
        print(markdown(records, sides))
        return
    atexit.register(stop_spinners)
    sides = ["tessera-2", "tessera-1"]
    if args.before:
        sides += ["before-2", "before-1"]
    if not args.no_timm:
        sides += ["timm-2", "timm-1"]
    records = []
    out = open(args.jsonl, "a") if args.jsonl else None
    for rnd in range(args.rounds):
        for model in args.models:
            for mode in args.modes.split(","):
                for condition in args.conditions.split(","):
                    for side in (sides if rnd % 2 == 0 else list(reversed(sides))):
                        if side.startswith("timm") and (rnd >= args.timm_rounds or
                                                        condition not in args.timm_conditions.split(",")):
                            continue
                        busy = wait_idle(args.wait_idle)
                        for _ in range(BUSY_CORES[condition]):
                            start_spinner(args.seconds * 20 + 120)
                        try:
                            r = measure(side, args, model, mode)
                        finally:
                            stop_spinners()
                        rec = dict(model=model, mode=mode, condition=condition, side=side, round=rnd + 1,
                                   busy_before=round(busy, 3), images_per_s=r["images_per_s"],
                                   peak_memory_mib=r.get("peak_memory_mib"), time=time.time())
                        records.append(rec)
                        print(json.dumps(rec), flush=True)
                        if out:
                            out.write(json.dumps(rec) + "\n")
                            out.flush()
    if args.markdown:
        print(markdown(records, sides))


if __name__ == "__main__":
    main()
