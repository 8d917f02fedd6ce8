#!/usr/bin/python3
"""Tessera against OpenVINO on the CPU: inference, float32, one model at a time (issue 48).

For each model, timm's ONNX export of it (timm.utils.onnx.onnx_export on Debian's PyTorch 1.13,
opset 17) is compiled by OpenVINO's CPU plugin (pip's `openvino`) with INFERENCE_PRECISION_HINT=f32,
INFERENCE_NUM_THREADS=--threads, PERFORMANCE_HINT=LATENCY and NUM_STREAMS=1 (one request at a time,
the whole batch in it: what `tessera bench` does), its input reshaped to the static
[batch, 3, 224, 224]; and `tessera bench --mode infer --json` runs the same architecture, batch and
thread count. Each side is timed as `tessera bench` times: `--warmup` untimed inferences on one fixed
random batch, then inferences until both `--steps` and `--seconds` are reached; images/s = images /
elapsed wall time. Compilation (OpenVINO) and model construction (Tessera) are outside the timing.

The two sides run one after the other, never at the same time, alternated round by round (Tessera,
OpenVINO, Tessera, OpenVINO, ...: these 2-core VMs drift by up to 1.8x over minutes), each round in a
fresh process. Reported per side: images/s, best and median of the rounds; the ratio Tessera /
OpenVINO of the bests and of the medians; the peak resident memory (VmHWM) of each process — for
OpenVINO it includes the Python interpreter, numpy and OpenVINO's libraries, and the graph read from
ONNX while compiling; for Tessera its code, the weights and its allocator's cache. Each measurement
also records the share of the CPU that was busy in the half second before it started (`busy_before`,
from /proc/stat): anything well above 0 means someone else was running.

Weights: timm's random initialisation (torch.manual_seed(--seed)), then N(0, 0.02) noise added to
every parameter, so that no residual branch is ~0 (CaiT's LayerScale starts at 1e-5, which would
hide a wrong branch from the check below) and biases are not 0. Speed does not depend on the values.

The check that both compute the same model: the weights are saved with torch.save and loaded by
`tessera predict --weights` (timm's state_dict names; Tessera reads a .pth itself); the same
[batch, 3, 224, 224] input goes through timm on PyTorch, OpenVINO and Tessera, and the largest
|difference| of the logits, relative to the largest |logit| of timm's, must be below --tolerance
(1e-3; float32 over 12-24 blocks differs by about 1e-6). A failed check is reported in the JSON and
the table and makes the exit status 1; the timing still runs.

Set-up (skipped with --no-setup): `bash scripts/setup.sh python3-torch python3-torchvision
python3-onnx` (Debian's PyTorch 1.13, used only to export; never PyPI's torch); timm into --timm-path
(`pip install --no-deps --target`, as scripts/bench_models.sh); openvino (and the numpy it needs)
into --openvino-path (`pip install --target`). PyTorch and OpenVINO never share a process: Debian's
torch 1.13 needs Debian's numpy 1.24, pip's openvino brings numpy 2; each worker runs this file with
its own PYTHONPATH. The exports are cached in --work-dir, keyed by model, batch, seed, opset and timm
version (--reexport redoes them).

The tessera binary and its libtessera.so are copied to a temporary folder first and run from there
(LD_LIBRARY_PATH; the binary's RUNPATH yields to it, checked with ldd), so a rebuild of build/ while
this runs changes nothing.

Final table (~8 minutes on an idle 2-core VM: 3 models x 5 rounds x 2 sides x (10 s + ~3 s start);
the exports, ~30 s, only the first time; --wait-idle 0.1 holds each measurement until at most 10% of
the CPU is busy, up to --wait-idle-max seconds, so the run takes longer while others compile):

  /usr/bin/python3 bench/openvino_compare.py --seconds 10 --rounds 5 --wait-idle 0.1 --markdown \\
      --jsonl build/bench-results/openvino-$(date -u +%Y%m%dT%H%M%S).jsonl

A short run to see that it works: --seconds 1 --steps 2 --rounds 1. `--table RUN.jsonl` prints the
markdown table again from a saved run.

Where the time goes (--profile, instead of timing): for each model one inference of each side with
its own counters, Tessera's per kernel (`tessera bench --profile`) and OpenVINO's per node and
kernel (PERF_COUNT=YES), printed as two listings:

  /usr/bin/python3 bench/openvino_compare.py --profile --wait-idle 0.15 coat_lite_tiny
"""
import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

from proc_status import status_mib

DEFAULT_MODELS = ["xcit_nano_12_p16_224", "cait_xxs24_224", "coat_lite_tiny"]
HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
CACHE = os.path.join(os.path.expanduser("~"), ".cache", "tessera")


def log(msg):
    print(f"[openvino_compare] {msg}", file=sys.stderr, flush=True)



# ---------------------------------------------------------------------------------------------
# Workers: this file run again in a child process with timm's or OpenVINO's PYTHONPATH.


def worker_export(args):
    """timm model -> model.onnx (timm's onnx_export), weights.pth, input.npy, timm_logits.npy in --out."""
    import numpy as np
    import timm
    import torch
    from timm.utils.onnx import onnx_export

    torch.manual_seed(args.seed)
    model = timm.create_model(args.model, exportable=True).eval()
    gen = torch.Generator().manual_seed(args.seed + 1)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn(p.shape, generator=gen) * 0.02)
    img = model.default_cfg["input_size"][-1]
    x = torch.randn(args.batch, 3, img, img, generator=gen)
    tmp = args.out + ".part"
    shutil.rmtree(tmp, ignore_errors=True)
    os.makedirs(tmp)
    torch.save(model.state_dict(), os.path.join(tmp, "weights.pth"))
    np.save(os.path.join(tmp, "input.npy"), x.numpy())
    with torch.no_grad():
        np.save(os.path.join(tmp, "timm_logits.npy"), model(x).numpy())
    onnx_export(model, os.path.join(tmp, "model.onnx"), example_input=x, opset=args.opset, check=True,
                input_names=["input"], output_names=["logits"])
    meta = {"model": args.model, "batch": args.batch, "img_size": img, "seed": args.seed, "opset": args.opset,
            "params": sum(p.numel() for p in model.parameters()), "torch": torch.__version__,
            "timm": timm.__version__}
    with open(os.path.join(tmp, "meta.json"), "w") as f:
        json.dump(meta, f)
    shutil.rmtree(args.out, ignore_errors=True)
    os.rename(tmp, args.out)
    print(json.dumps(meta))


def ov_config(args):
    cfg = {"INFERENCE_PRECISION_HINT": "f32", "INFERENCE_NUM_THREADS": str(args.threads),
           "PERFORMANCE_HINT": args.ov_hint, "NUM_STREAMS": "1"}
    if args.profile:
        cfg["PERF_COUNT"] = "YES"
    for kv in args.ov_config:
        k, v = kv.split("=", 1)
        cfg[k] = v
    return cfg


def openvino_profile(req, rec):
    """One more inference with OpenVINO's per-node counters (PERF_COUNT): the milliseconds of each
    (node type, kernel) pair it ran, summed, largest first."""
    req.infer()
    totals = {}
    for node in req.profiling_info:
        if node.status != node.status.EXECUTED:
            continue
        key = f"{node.node_type} ({node.exec_type})"
        calls, ms = totals.get(key, (0, 0.0))
        totals[key] = (calls + 1, ms + node.real_time.total_seconds() * 1e3)
    rows = sorted(totals.items(), key=lambda kv: -kv[1][1])
    rec.update(kind="profile", total_ms=round(sum(ms for _, ms in totals.values()), 2),
               nodes=[{"node": k, "calls": c, "ms": round(ms, 2)} for k, (c, ms) in rows])
    return rec


def worker_openvino(args):
    """Compile the export with OpenVINO's CPU plugin and time it (or, with --check, run it once on
    input.npy and compare its logits with timm's and Tessera's). One JSON line on stdout."""
    import numpy as np
    import openvino as ov

    d = args.export_dir
    x = np.ascontiguousarray(np.load(os.path.join(d, "input.npy")), dtype=np.float32)
    core = ov.Core()
    start = time.perf_counter()
    model = core.read_model(os.path.join(d, "model.onnx"))
    model.reshape(list(x.shape))
    compiled = core.compile_model(model, "CPU", ov_config(args))
    del model
    compile_s = time.perf_counter() - start
    req = compiled.create_infer_request()
    req.set_input_tensor(ov.Tensor(x, shared_memory=True))
    props = {}
    for k in ("INFERENCE_PRECISION_HINT", "INFERENCE_NUM_THREADS", "PERFORMANCE_HINT", "NUM_STREAMS",
              "ENABLE_CPU_PINNING", "ENABLE_HYPER_THREADING", "OPTIMAL_NUMBER_OF_INFER_REQUESTS"):
        try:
            v = compiled.get_property(k)
            props[k] = v.to_string() if hasattr(v, "to_string") else str(v)
        except Exception:  # a property this version does not have
            pass
    rec = {"side": "openvino", "openvino": ov.get_version(), "numpy": np.__version__,
           "compile_s": round(compile_s, 3), "compiled_properties": props}
    if args.check:
        req.infer()
        y = np.array(req.get_output_tensor().data, dtype=np.float32)
        timm_y = np.load(os.path.join(d, "timm_logits.npy")).astype(np.float32)
        tess_y = np.load(args.check).astype(np.float32)
        scale = float(np.abs(timm_y).max())
        diffs = {}
        for name, a, b in (("tessera_vs_openvino", tess_y, y), ("tessera_vs_timm", tess_y, timm_y),
                           ("openvino_vs_timm", y, timm_y)):
            if a.shape != b.shape:
                diffs[name] = {"shapes": [list(a.shape), list(b.shape)]}
                continue
            diff = float(np.abs(a - b).max())
            diffs[name] = {"max_abs": diff, "rel": diff / scale,
                           "argmax_agree": float((a.argmax(1) == b.argmax(1)).mean())}
        ok = all("rel" in v and v["rel"] <= args.tolerance for v in diffs.values())
        rec.update(kind="check", max_abs_logit=scale, tolerance=args.tolerance, diffs=diffs, ok=ok)
        print(json.dumps(rec))
        return
    for _ in range(args.warmup):
        req.infer()
    if args.profile:
        print(json.dumps(openvino_profile(req, rec)))
        return
    rss_before = status_mib("VmRSS")
    start = time.perf_counter()
    done, elapsed = 0, 0.0
    while done < args.steps or elapsed < args.seconds:
        req.infer()
        done += 1
        elapsed = time.perf_counter() - start
    rec.update(kind="bench", batch=int(x.shape[0]), img_size=int(x.shape[-1]), threads=args.threads, steps=done,
               seconds=round(elapsed, 3), images_per_s=round(done * x.shape[0] / elapsed, 3),
               peak_memory_mib=round(status_mib("VmHWM"), 1), rss_before_mib=round(rss_before, 1))
    print(json.dumps(rec))


# ---------------------------------------------------------------------------------------------
# The driver.


def cpu_name():
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
        for line in out.splitlines():
            if line.startswith("Model name:"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor()


def cpu_busy(seconds=0.5):
    """Share of all CPUs busy over `seconds` (from /proc/stat), before a measurement starts."""
    def sample():
        with open("/proc/stat") as f:
            v = [int(x) for x in f.readline().split()[1:]]
        return sum(v), v[3] + v[4]  # total, idle + iowait
    t0, i0 = sample()
    time.sleep(seconds)
    t1, i1 = sample()
    return round(1.0 - (i1 - i0) / max(t1 - t0, 1), 3)


def wait_idle(args):
    """With --wait-idle, until at most that share of the CPU is busy (or --wait-idle-max seconds):
    (the busy share last seen, seconds waited)."""
    busy, waited = cpu_busy(), 0.0
    while args.wait_idle > 0 and busy > args.wait_idle and waited < args.wait_idle_max:
        busy = cpu_busy()
        waited += 0.5
    return busy, waited


def run_json(cmd, env, timeout, what):
    """The last stdout line of `cmd` as JSON, or None (what it said goes to stderr)."""
    try:
        r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        log(f"{what}: no result in {timeout} s")
        return None
    if r.returncode != 0 or not r.stdout.strip():
        tail = "\n".join(r.stderr.strip().splitlines()[-5:])
        log(f"{what}: exit status {r.returncode}\n{tail}")
        return None
    return json.loads(r.stdout.strip().splitlines()[-1])


def setup(args):
    subprocess.run(["bash", os.path.join(REPO, "scripts", "setup.sh"), "python3-torch", "python3-torchvision",
                    "python3-onnx"], check=True)
    pip = ["/usr/bin/python3", "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
    if not os.path.isdir(os.path.join(args.timm_path, "timm")):
        log(f"installing timm into {args.timm_path}")
        subprocess.run(pip + ["--no-deps", "--target", args.timm_path, "timm"], check=True)
    if not os.path.isdir(os.path.join(args.openvino_path, "openvino")):
        log(f"installing {args.openvino_spec} into {args.openvino_path}")
        subprocess.run(pip + ["--target", args.openvino_path, args.openvino_spec], check=True)


def copy_tessera(binary, dest):
    """Copy the tessera binary and the libtessera it loads into dest; check that it loads that copy."""
    binary = os.path.abspath(binary)
    if not os.path.isfile(binary):
        raise SystemExit(f"no tessera binary at {binary} (--tessera)")
    out = subprocess.run(["ldd", binary], capture_output=True, text=True, check=True).stdout
    shutil.copy2(binary, os.path.join(dest, "tessera"))
    for line in out.splitlines():
        parts = line.split()
        if parts and parts[0].startswith("libtessera") and "=>" in parts:
            lib = parts[parts.index("=>") + 1]
            if not os.path.isfile(lib):
                raise SystemExit(f"{binary} needs {parts[0]}, not found: {line.strip()}")
            shutil.copy2(lib, os.path.join(dest, parts[0]))
    env = dict(os.environ, LD_LIBRARY_PATH=dest + (":" + os.environ["LD_LIBRARY_PATH"]
                                                   if os.environ.get("LD_LIBRARY_PATH") else ""))
    out = subprocess.run(["ldd", os.path.join(dest, "tessera")], env=env, capture_output=True, text=True,
                         check=True).stdout
    for line in out.splitlines():
        parts = line.split()
        if parts and parts[0].startswith("libtessera") and not parts[2].startswith(dest + "/"):
            raise SystemExit(f"the copy of tessera would load {parts[2]}, not the copy in {dest}")
    version = subprocess.run([os.path.join(dest, "tessera"), "--version"], env=env, capture_output=True, text=True,
                             check=True).stdout.strip()
    return os.path.join(dest, "tessera"), env, version


def export(args, model):
    key = f"{model}-b{args.batch}-seed{args.seed}-opset{args.opset}-timm{timm_version(args.timm_path)}"
    d = os.path.join(args.work_dir, key)
    if os.path.isfile(os.path.join(d, "meta.json")) and not args.reexport:
        return d
    log(f"{model}: exporting with timm to {d}")
    os.makedirs(args.work_dir, exist_ok=True)
    env = dict(os.environ, PYTHONPATH=args.timm_path, OMP_NUM_THREADS=str(args.threads))
    cmd = ["/usr/bin/python3", os.path.abspath(__file__), "--worker", "export", "--model", model,
           "--batch", str(args.batch), "--seed", str(args.seed), "--opset", str(args.opset), "--out", d]
    if run_json(cmd, env, args.timeout, f"{model}: export") is None:
        return None
    return d


def timm_version(path):
    for name in os.listdir(path):
        if name.startswith("timm-") and name.endswith(".dist-info"):
            return name[len("timm-"):-len(".dist-info")]
    return "unknown"


def ov_cmd(args, export_dir):
    cmd = ["/usr/bin/python3", os.path.abspath(__file__), "--worker", "openvino", "--export-dir", export_dir,
           "--threads", str(args.threads), "--ov-hint", args.ov_hint, "--warmup", str(args.warmup),
           "--steps", str(args.steps), "--seconds", str(args.seconds), "--tolerance", str(args.tolerance)]
    for kv in args.ov_config:
        cmd += ["--ov-config", kv]
    if args.profile:
        cmd.append("--profile")
    return cmd


def profile_both(args, model, export_dir, tessera, t_env, ov_env):
    """--profile: Tessera's time per kernel, then OpenVINO's per node, for one inference each."""
    wait_idle(args)
    r = subprocess.run([tessera, "bench", "--model", model, "--batch", str(args.batch), "--threads",
                        str(args.threads), "--mode", "infer", "--seconds", "1", "--profile"],
                       env=t_env, capture_output=True, text=True, timeout=args.timeout)
    print(f"## {model}: Tessera (tessera bench --profile)\n```\n{r.stdout.strip()}\n```", flush=True)
    wait_idle(args)
    rec = run_json(ov_cmd(args, export_dir), ov_env, args.timeout, f"{model}: openvino profile")
    if rec is None:
        return
    lines = [f"{n['node']:55s} {n['calls']:5d} {n['ms']:9.2f} ms" for n in rec["nodes"]]
    print(f"## {model}: OpenVINO (PERF_COUNT), {rec['total_ms']} ms\n```\n" + "\n".join(lines) + "\n```",
          flush=True)


def summarize(model, runs, check):
    s = {"kind": "summary", "model": model, "check_ok": None if check is None else check.get("ok")}
    for side in ("tessera", "openvino"):
        ips = [r["images_per_s"] for r in runs if r["side"] == side]
        mem = [r["peak_memory_mib"] for r in runs if r["side"] == side]
        s[side] = {"rounds": len(ips), "best": max(ips) if ips else None,
                   "median": round(statistics.median(ips), 3) if ips else None,
                   "peak_memory_mib": max(mem) if mem else None}
    busy = [r["busy_before"] for r in runs if "busy_before" in r]
    s["busy_before_max"] = max(busy) if busy else None
    t, o = s["tessera"], s["openvino"]
    s["ratio_best"] = round(t["best"] / o["best"], 3) if t["best"] and o["best"] else None
    s["ratio_median"] = round(t["median"] / o["median"], 3) if t["median"] and o["median"] else None
    s["memory_ratio"] = (round(t["peak_memory_mib"] / o["peak_memory_mib"], 3)
                         if t["peak_memory_mib"] and o["peak_memory_mib"] else None)
    return s


def table(header, summaries):
    lines = []
    if header:
        lines.append(f"{header['cpu']}, {header['cores']} cores, {header['threads']} threads; batch {header['batch']} "
                     f"at 224x224, float32; >= {header['seconds']:g} s per measurement, {header['rounds']} alternated "
                     f"rounds per side; {header['date']}; {header.get('openvino', 'OpenVINO ?')}, timm "
                     f"{header.get('timm', '?')} ONNX export (opset {header['opset']})")
        lines.append("")
    lines.append("| model | Tessera img/s best (median) | OpenVINO img/s best (median) | ratio best (median) | "
                 "Tessera peak MiB | OpenVINO peak MiB | logits match | CPU busy before (max) |")
    lines.append("|---|---:|---:|---:|---:|---:|---|---:|")

    def cell(v, fmt):
        return fmt.format(v) if v is not None else "n/a"
    for s in summaries:
        t, o = s["tessera"], s["openvino"]
        check = {True: "yes", False: "**no**", None: "not checked"}[s["check_ok"]]
        if s.get("check_rel") is not None:
            check += f" ({s['check_rel']:.1e})"
        lines.append(f"| {s['model']} | {cell(t['best'], '{:.2f}')} ({cell(t['median'], '{:.2f}')}) | "
                     f"{cell(o['best'], '{:.2f}')} ({cell(o['median'], '{:.2f}')}) | "
                     f"{cell(s['ratio_best'], '{:.2f}x')} ({cell(s['ratio_median'], '{:.2f}x')}) | "
                     f"{cell(t['peak_memory_mib'], '{:.0f}')} | {cell(o['peak_memory_mib'], '{:.0f}')} | {check} | "
                     f"{cell(s.get('busy_before_max'), '{:.0%}')} |")
    busiest = max((s.get("busy_before_max") or 0 for s in summaries), default=0)
    if busiest > 0.1:
        lines.append("")
        lines.append(f"Not a quiet machine: up to {busiest:.0%} of the CPU was busy in the half second before a "
                     "measurement started (other processes); these figures do not measure either side.")
    return "\n".join(lines)


def print_table_from(path):
    header, summaries = None, []
    with open(path) as f:
        for line in f:
            if line.strip():
                r = json.loads(line)
                if r.get("kind") == "header":
                    header, summaries = r, []  # the last run in the file
                elif r.get("kind") == "summary":
                    summaries.append(r)
    print(table(header, summaries))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    ap.add_argument("models", nargs="*", default=DEFAULT_MODELS)
    ap.add_argument("--tessera", default=os.path.join(REPO, "build", "bin", "tessera"), help="the tessera binary")
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--seconds", type=float, default=10.0, help="at least this long per measurement")
    ap.add_argument("--steps", type=int, default=5, help="and at least this many timed inferences")
    ap.add_argument("--warmup", type=int, default=2, help="untimed inferences first")
    ap.add_argument("--rounds", type=int, default=5, help="measurements per side, alternated")
    ap.add_argument("--ov-hint", default="LATENCY", choices=["LATENCY", "THROUGHPUT"],
                    help="OpenVINO's PERFORMANCE_HINT (NUM_STREAMS stays 1: one request at a time)")
    ap.add_argument("--ov-config", action="append", default=[], metavar="KEY=VALUE",
                    help="more OpenVINO CPU properties, e.g. ENABLE_CPU_PINNING=NO (repeatable)")
    ap.add_argument("--opset", type=int, default=17, help="ONNX opset of the export (Debian's torch 1.13: <= 17)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--tolerance", type=float, default=1e-3,
                    help="largest |logit difference| / largest |logit| accepted")
    ap.add_argument("--no-check", action="store_true", help="skip the check that the logits match")
    ap.add_argument("--markdown", action="store_true",
                    help="print a markdown table on stdout (the JSON lines then only go to --jsonl)")
    ap.add_argument("--jsonl", default="", help="also append every record here")
    ap.add_argument("--table", metavar="RUN.jsonl", help="print the markdown table of a saved run and exit")
    ap.add_argument("--profile", action="store_true",
                    help="instead of timing: where each side spends one inference, per kernel (tessera bench "
                         "--profile) and per node (OpenVINO's PERF_COUNT), one after the other")
    ap.add_argument("--timm-path", default="/opt/timm", help="where timm is (installed there if missing)")
    ap.add_argument("--openvino-path", default=os.path.join(CACHE, "openvino"),
                    help="where openvino is (installed there if missing)")
    ap.add_argument("--openvino-spec", default="openvino", help="what pip installs, e.g. openvino==2026.4.1")
    ap.add_argument("--work-dir", default=os.path.join(CACHE, "openvino_compare"), help="the exports' cache")
    ap.add_argument("--reexport", action="store_true")
    ap.add_argument("--no-setup", action="store_true")
    ap.add_argument("--wait-idle", type=float, default=0.0, metavar="FRACTION",
                    help="before each measurement, wait until at most this share of the CPU is busy (e.g. 0.1)")
    ap.add_argument("--wait-idle-max", type=float, default=600.0, help="but no longer than this many seconds")
    ap.add_argument("--timeout", type=float, default=900, help="seconds before one child process is given up")
    # Internal: this file as a worker process.
    ap.add_argument("--worker", choices=["export", "openvino"], help=argparse.SUPPRESS)
    ap.add_argument("--model", help=argparse.SUPPRESS)
    ap.add_argument("--out", help=argparse.SUPPRESS)
    ap.add_argument("--export-dir", help=argparse.SUPPRESS)
    ap.add_argument("--check", default="", help=argparse.SUPPRESS)
    args = ap.parse_args()

    if args.worker == "export":
        return worker_export(args)
    if args.worker == "openvino":
        return worker_openvino(args)
    if args.table:
        return print_table_from(args.table)

    if not args.no_setup:
        setup(args)
    if args.jsonl and os.path.dirname(args.jsonl):
        os.makedirs(os.path.dirname(args.jsonl), exist_ok=True)
    jsonl = open(args.jsonl, "a") if args.jsonl else None

    def emit(rec):
        line = json.dumps(rec)
        if jsonl:
            jsonl.write(line + "\n")
            jsonl.flush()
        if not args.markdown:
            print(line, flush=True)

    ov_env = dict(os.environ, PYTHONPATH=args.openvino_path, OMP_NUM_THREADS=str(args.threads))
    failed = False
    with tempfile.TemporaryDirectory(prefix="tessera-ov-") as tmp:
        tessera, t_env, t_version = copy_tessera(args.tessera, tmp)
        t_env.update(OMP_NUM_THREADS=str(args.threads), TESSERA_NUM_THREADS=str(args.threads))
        ov_version = run_json(["/usr/bin/python3", "-c", "import json, openvino, numpy; print(json.dumps("
                               "{'openvino': openvino.get_version(), 'numpy': numpy.__version__}))"],
                              ov_env, 120, "openvino import")
        if ov_version is None:
            raise SystemExit(f"openvino does not import from {args.openvino_path}")
        head = subprocess.run(["git", "-C", REPO, "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True).stdout.strip()
        header = {"kind": "header", "cpu": cpu_name(), "cores": os.cpu_count(), "threads": args.threads,
                  "batch": args.batch, "seconds": args.seconds, "steps": args.steps, "rounds": args.rounds,
                  "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                  "openvino": f"OpenVINO {ov_version['openvino']}", "timm": timm_version(args.timm_path),
                  "opset": args.opset, "ov_hint": args.ov_hint, "ov_config": args.ov_config,
                  "tessera_binary": os.path.abspath(args.tessera), "tessera_version": t_version, "repo_head": head}
        emit(header)
        if args.markdown:
            print(f"{header['cpu']}: alternating Tessera and OpenVINO, {args.rounds} rounds per model", file=sys.stderr)
        summaries = []
        for model in args.models:
            d = export(args, model)
            if d is None:
                failed = True
                continue
            if args.profile:
                profile_both(args, model, d, tessera, t_env, ov_env)
                continue
            check = None
            if not args.no_check:
                out = os.path.join(tmp, f"{model}.tessera_logits.npy")
                r = subprocess.run([tessera, "predict", "--model", model, "--weights", os.path.join(d, "weights.pth"),
                                    "--input", os.path.join(d, "input.npy"), "--output", out,
                                    "--threads", str(args.threads)], env=t_env, capture_output=True, text=True,
                                   timeout=args.timeout)
                if r.returncode != 0:
                    log(f"{model}: tessera predict failed: {r.stderr.strip()[-500:]}")
                    check = {"kind": "check", "ok": False, "error": r.stderr.strip()[-500:]}
                else:
                    check = run_json(ov_cmd(args, d) + ["--check", out], ov_env, args.timeout,
                                     f"{model}: openvino check") or {"kind": "check", "ok": False}
                check["model"] = model
                emit(check)
                if not check.get("ok"):
                    failed = True
                    log(f"{model}: the logits do not match: {json.dumps(check.get('diffs'))}")
            runs = []
            for rnd in range(args.rounds):
                for side in ("tessera", "openvino"):
                    if side == "tessera":
                        cmd = [tessera, "bench", "--model", model, "--batch", str(args.batch), "--threads",
                               str(args.threads), "--mode", "infer", "--seconds", str(args.seconds), "--steps",
                               str(args.steps), "--warmup", str(args.warmup), "--json"]
                        env = t_env
                    else:
                        cmd, env = ov_cmd(args, d), ov_env
                    busy, waited = wait_idle(args)
                    r = run_json(cmd, env, args.timeout, f"{model}: {side} round {rnd + 1}")
                    if r is None:
                        failed = True
                        continue
                    r.update(kind="bench", side=side, model=model, round=rnd + 1, busy_before=busy,
                             waited_idle_s=waited)
                    runs.append(r)
                    emit(r)
                    log(f"{model} round {rnd + 1} {side}: {r['images_per_s']:.2f} img/s (CPU busy before: "
                        f"{busy:.0%})")
            s = summarize(model, runs, check)
            if check and check.get("diffs", {}).get("tessera_vs_openvino", {}).get("rel") is not None:
                s["check_rel"] = check["diffs"]["tessera_vs_openvino"]["rel"]
            summaries.append(s)
            emit(s)
    if args.markdown:
        print(table(header, summaries))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
