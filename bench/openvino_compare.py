#!/usr/bin/python3
"""Tessera against OpenVINO on the CPU: inference, float32 and bfloat16, one model at a time (issue 48).

For each model, timm's ONNX export of it (timm.utils.onnx.onnx_export on Debian's PyTorch 1.13,
opset 17) is compiled by OpenVINO's CPU plugin (pip's `openvino`) with INFERENCE_NUM_THREADS=--threads,
PERFORMANCE_HINT=LATENCY and NUM_STREAMS=1 (one request at a time, the whole batch in it: what
`tessera bench` does), its input reshaped to the static [batch, 3, 224, 224]; and `tessera bench
--mode infer --json` runs the same architecture, batch and thread count. Four sides (--sides, a comma
list; all four by default), the precisions users get:

  tessera           `tessera bench`: float32.
  tessera-bf16      `tessera bench --amp bf16`: bfloat16 autocast (bfloat16 activations, float32
                    parameters; natively with AVX-512 BF16 or AMX, else a portable path), its JSON's
                    "precision" and "instruction_set" recorded.
  openvino-f32      OpenVINO with INFERENCE_PRECISION_HINT=f32.
  openvino-default  OpenVINO with no INFERENCE_PRECISION_HINT: the plugin's default, bf16 on CPUs with
                    avx512_core_bf16 (or AMX), f32 elsewhere. The precision it chose (the compiled
                    model's INFERENCE_PRECISION_HINT) is recorded ("precision") and named in the table.

Each side is timed as `tessera bench` times: `--warmup` untimed inferences on one fixed random batch,
then inferences until both `--steps` and `--seconds` are reached; images/s = images / elapsed wall
time. Compilation (OpenVINO) and model construction (Tessera) are outside the timing.

The sides run one after the other, never at the same time, alternated round by round (tessera,
tessera-bf16, openvino-f32, openvino-default, tessera, ...: these 2-core VMs drift by up to 1.8x over
minutes), each round in a fresh process. Reported per side: images/s, best and median of the rounds,
and the peak resident memory (VmHWM) of each process — for OpenVINO it includes the Python
interpreter, numpy and OpenVINO's libraries, and the graph read from ONNX while compiling (and, at
bf16, the weights it converted); for Tessera its code, the weights and its allocator's cache. And the
two ratios a user weighs, of the bests and of the medians: tessera-bf16 / openvino-default (each at
the precision it runs by default or with one flag) and tessera / openvino-f32 (both float32). Each
measurement also records the share of the CPU that was busy in the half second before it started
(`busy_before`, from /proc/stat): anything well above 0 means someone else was running.

Weights: timm's random initialisation (torch.manual_seed(--seed)), then N(0, 0.02) noise added to
every parameter, so that no residual branch is ~0 (CaiT's LayerScale starts at 1e-5, which would
hide a wrong branch from the check below) and biases are not 0. Speed does not depend on the values.

The check that both compute the same model: the weights are saved with torch.save and loaded by
`tessera predict --weights` (timm's state_dict names; Tessera reads a .pth itself); the same
[batch, 3, 224, 224] input goes through timm on PyTorch, OpenVINO f32 and Tessera (`tessera
predict`), and the largest |difference| of the logits, relative to the largest |logit| of timm's,
must be below --tolerance (1e-3; float32 over 12-24 blocks differs by about 1e-6) for each pair. A
failed check is reported in the JSON and the table and makes the exit status 1; the timing still
runs. With tessera-bf16 or openvino-default among the sides, the same input also goes through
`tessera predict --amp bf16` and OpenVINO's default, and each is compared with its own float32
logits, by the same measure (relative to timm's largest |logit|) and the share of images whose
argmax agrees: `tessera_bf16_vs_tessera_f32` and `openvino_default_vs_openvino_f32`. bfloat16 keeps
8 bits of mantissa, so these are not held to --tolerance; the table shows the two side by side, and
the check record says whether Tessera's is no larger than OpenVINO's (`bf16_no_further`; the issue's
requirement: Tessera's bfloat16 logits no further from its float32 ones than OpenVINO's bfloat16
logits from its float32 ones). Where OpenVINO's default is f32 (no bf16 in the CPU), its difference
is ~1e-6 and the comparison says little.

Set-up (skipped with --no-setup): `bash scripts/setup.sh python3-torch python3-torchvision
python3-onnx` (Debian's PyTorch 1.13, used only to export; never PyPI's torch); timm into --timm-path
(~/.cache/tessera/timm by default, `pip install --no-deps --target`: no root needed); openvino (and
the numpy it needs) into --openvino-path (`pip install --target`). PyTorch and OpenVINO never share a
process: Debian's torch 1.13 needs Debian's numpy 1.24, pip's openvino brings numpy 2; each worker
runs this file with its own PYTHONPATH. The exports are cached in --work-dir, keyed by model, batch,
seed, opset and timm version (--reexport redoes them).

The tessera binary and its libtessera.so are copied to a temporary folder first and run from there
(LD_LIBRARY_PATH; the binary's RUNPATH yields to it, checked with ldd), so a rebuild of build/ while
this runs changes nothing.

Final table (~13 minutes on an idle 2-core VM: 3 models x 5 rounds x 4 sides x (10 s + ~3 s start);
the exports, ~30 s, only the first time; --wait-idle 0.1 holds each measurement until at most 10% of
the CPU is busy, up to --wait-idle-max seconds, so the run takes longer while others compile):

  /usr/bin/python3 bench/openvino_compare.py --seconds 10 --rounds 5 --wait-idle 0.1 --markdown \\
      --jsonl build/bench-results/openvino-$(date -u +%Y%m%dT%H%M%S).jsonl

Only float32, as before (~7 minutes): add --sides tessera,openvino-f32. A short run to see that it
works: --seconds 1 --steps 2 --rounds 1. `--table RUN.jsonl` prints the markdown tables again from a
saved run.

Where the time goes (--profile, instead of timing): for each model one inference of each selected
side with its own counters, Tessera's per kernel (`tessera bench --profile`, with --amp bf16 for
tessera-bf16) and OpenVINO's per node and kernel (PERF_COUNT=YES), printed as one listing per side:

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

from proc_status import cpu_busy, status_mib

DEFAULT_MODELS = ["xcit_nano_12_p16_224", "cait_xxs24_224", "coat_lite_tiny"]
SIDES = ["tessera", "tessera-bf16", "openvino-f32", "openvino-default"]
SIDE_NAMES = {"tessera": "Tessera f32", "tessera-bf16": "Tessera bf16", "openvino-f32": "OpenVINO f32",
              "openvino-default": "OpenVINO default"}
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
    """The CPU plugin's properties: INFERENCE_PRECISION_HINT=f32 for openvino-f32, none (the plugin's
    default) for openvino-default."""
    cfg = {"INFERENCE_NUM_THREADS": str(args.threads), "PERFORMANCE_HINT": args.ov_hint, "NUM_STREAMS": "1"}
    if args.ov_precision == "f32":
        cfg["INFERENCE_PRECISION_HINT"] = "f32"
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


def ov_str(v):
    """An OpenVINO property as a string: element types by their short name (bf16, f32)."""
    return v.to_string() if hasattr(v, "to_string") else str(v)


def worker_openvino_info(args):
    """The versions, and the inference precision the CPU plugin picks when none is asked for."""
    import numpy as np
    import openvino as ov

    rec = {"openvino": ov.get_version(), "numpy": np.__version__}
    try:
        rec["default_precision"] = ov_str(ov.Core().get_property("CPU", "INFERENCE_PRECISION_HINT"))
    except Exception as e:  # noqa: BLE001 - reported, not fatal
        rec["default_precision_error"] = str(e)
    print(json.dumps(rec))


def worker_openvino(args):
    """Compile the export with OpenVINO's CPU plugin (--ov-precision f32 or default) and time it (or,
    with --check OUT.npy, run it once on input.npy and save its logits there). One JSON line on stdout."""
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
            props[k] = ov_str(v)
        except Exception:  # a property this version does not have
            pass
    rec = {"side": f"openvino-{args.ov_precision}", "openvino": ov.get_version(), "numpy": np.__version__,
           "precision_hint": "f32" if args.ov_precision == "f32" else None,
           "precision": props.get("INFERENCE_PRECISION_HINT"), "compile_s": round(compile_s, 3),
           "compiled_properties": props}
    if args.check:
        req.infer()
        np.save(args.check, np.array(req.get_output_tensor().data, dtype=np.float32))
        rec.update(kind="logits", logits=args.check)
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


# The check's pairs: (name, logits, reference). The float32 ones must agree within --tolerance; the
# bfloat16 ones are reported, Tessera's against OpenVINO's.
F32_PAIRS = [("tessera_vs_openvino", "tessera", "openvino-f32"), ("tessera_vs_timm", "tessera", "timm"),
             ("openvino_vs_timm", "openvino-f32", "timm")]
BF16_PAIRS = [("tessera_bf16_vs_tessera_f32", "tessera-bf16", "tessera"),
              ("openvino_default_vs_openvino_f32", "openvino-default", "openvino-f32")]


def worker_compare(args):
    """The check: each --logits SIDE=FILE.npy (a missing file: that side failed) against the others and
    timm's, |difference| relative to timm's largest |logit|. One JSON line on stdout."""
    import numpy as np

    d = args.export_dir
    timm_y = np.load(os.path.join(d, "timm_logits.npy")).astype(np.float32)
    scale = float(np.abs(timm_y).max())
    logits = {"timm": timm_y}
    for kv in args.logits:
        side, path = kv.split("=", 1)
        logits[side] = np.load(path).astype(np.float32) if os.path.isfile(path) else None
    diffs = {}
    for name, a, b in F32_PAIRS + BF16_PAIRS:
        if a not in logits or b not in logits:
            continue  # a side not run
        ya, yb = logits[a], logits[b]
        if ya is None or yb is None:
            diffs[name] = {"missing": [n for n, y in ((a, ya), (b, yb)) if y is None]}
        elif ya.shape != yb.shape:
            diffs[name] = {"shapes": [list(ya.shape), list(yb.shape)]}
        else:
            diff = float(np.abs(ya - yb).max())
            diffs[name] = {"max_abs": diff, "rel": diff / scale,
                           "argmax_agree": float((ya.argmax(1) == yb.argmax(1)).mean())}
    ok = all(name in diffs and diffs[name].get("rel", float("inf")) <= args.tolerance for name, _, _ in F32_PAIRS)
    t, o = (diffs.get(name, {}).get("rel") for name, _, _ in BF16_PAIRS)
    print(json.dumps({"kind": "check", "max_abs_logit": scale, "tolerance": args.tolerance, "diffs": diffs,
                      "ok": ok, "bf16_no_further": t <= o if t is not None and o is not None else None}))


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


def ov_cmd(args, export_dir, side):
    cmd = ["/usr/bin/python3", os.path.abspath(__file__), "--worker", "openvino", "--export-dir", export_dir,
           "--ov-precision", side[len("openvino-"):], "--threads", str(args.threads), "--ov-hint", args.ov_hint,
           "--warmup", str(args.warmup), "--steps", str(args.steps), "--seconds", str(args.seconds)]
    for kv in args.ov_config:
        cmd += ["--ov-config", kv]
    if args.profile:
        cmd.append("--profile")
    return cmd


def tessera_cmd(tessera, command, model, args, side):
    cmd = [tessera, command, "--model", model, "--threads", str(args.threads)]
    return cmd + (["--amp", "bf16"] if side == "tessera-bf16" else [])


def profile_sides(args, model, export_dir, tessera, t_env, ov_env):
    """--profile: for one inference of each selected side, Tessera's time per kernel, OpenVINO's per node."""
    for side in args.sides:
        wait_idle(args)
        if side.startswith("tessera"):
            r = subprocess.run(tessera_cmd(tessera, "bench", model, args, side) +
                               ["--batch", str(args.batch), "--mode", "infer", "--seconds", "1", "--profile"],
                               env=t_env, capture_output=True, text=True, timeout=args.timeout)
            amp = " --amp bf16" if side == "tessera-bf16" else ""
            print(f"## {model}: {SIDE_NAMES[side]} (tessera bench{amp} --profile)\n```\n{r.stdout.strip()}\n```",
                  flush=True)
            if r.returncode != 0:
                log(f"{model}: {side} profile: exit status {r.returncode}\n{r.stderr.strip()[-500:]}")
            continue
        rec = run_json(ov_cmd(args, export_dir, side), ov_env, args.timeout, f"{model}: {side} profile")
        if rec is None:
            continue
        lines = [f"{n['node']:55s} {n['calls']:5d} {n['ms']:9.2f} ms" for n in rec["nodes"]]
        print(f"## {model}: {SIDE_NAMES[side]} (PERF_COUNT; inference precision {rec.get('precision')}), "
              f"{rec['total_ms']} ms\n```\n" + "\n".join(lines) + "\n```", flush=True)


def check_logits(args, model, export_dir, tessera, t_env, ov_env, tmp):
    """The check record: the logits of tessera and openvino-f32 (always) and of the bfloat16 sides
    selected, on input.npy, each process in turn, compared by worker_compare."""
    sides = ["tessera", "openvino-f32"] + [s for s in ("tessera-bf16", "openvino-default") if s in args.sides]
    files, info = {}, {}
    for side in sides:
        out = files[side] = os.path.join(tmp, f"{model}.{side}.logits.npy")
        if side.startswith("tessera"):
            r = subprocess.run(tessera_cmd(tessera, "predict", model, args, side) +
                               ["--weights", os.path.join(export_dir, "weights.pth"),
                                "--input", os.path.join(export_dir, "input.npy"), "--output", out],
                               env=t_env, capture_output=True, text=True, timeout=args.timeout)
            if r.returncode != 0:
                log(f"{model}: {side} predict failed: {r.stderr.strip()[-500:]}")
                info[side] = {"error": r.stderr.strip()[-500:]}
        else:
            rec = run_json(ov_cmd(args, export_dir, side) + ["--check", out], ov_env, args.timeout,
                           f"{model}: {side} logits")
            info[side] = {"precision": rec.get("precision")} if rec else {"error": "no logits"}
    cmd = ["/usr/bin/python3", os.path.abspath(__file__), "--worker", "compare", "--export-dir", export_dir,
           "--tolerance", str(args.tolerance)]
    for side in sides:
        cmd += ["--logits", f"{side}={files[side]}"]
    check = run_json(cmd, ov_env, args.timeout, f"{model}: compare") or {"kind": "check", "ok": False}
    check.update(model=model, logits_sides=info)
    return check


def summarize(model, runs, check, sides):
    s = {"kind": "summary", "model": model, "sides": sides,
         "check_ok": None if check is None else check.get("ok")}
    for side in sides:
        rs = [r for r in runs if r["side"] == side]
        ips = [r["images_per_s"] for r in rs]
        mem = [r["peak_memory_mib"] for r in rs]
        s[side] = {"rounds": len(ips), "best": max(ips) if ips else None,
                   "median": round(statistics.median(ips), 3) if ips else None,
                   "peak_memory_mib": max(mem) if mem else None,
                   "precision": rs[0].get("precision") if rs else None}
        if side.startswith("tessera") and rs:
            s[side]["instruction_set"] = rs[0].get("instruction_set")
    busy = [r["busy_before"] for r in runs if "busy_before" in r]
    s["busy_before_max"] = max(busy) if busy else None
    for name, a, b in (("f32", "tessera", "openvino-f32"), ("bf16", "tessera-bf16", "openvino-default")):
        t, o = s.get(a, {}), s.get(b, {})
        for key, field in (("ratio_%s_best", "best"), ("ratio_%s_median", "median"),
                           ("memory_ratio_%s", "peak_memory_mib")):
            s[key % name] = round(t[field] / o[field], 3) if t.get(field) and o.get(field) else None
    if check:
        diffs = check.get("diffs", {})
        s["check_rel"] = diffs.get("tessera_vs_openvino", {}).get("rel")
        for name, _, _ in BF16_PAIRS:
            if name in diffs:
                s[name] = diffs[name]
        s["bf16_no_further"] = check.get("bf16_no_further")
        if check.get("logits_sides", {}).get("openvino-default", {}).get("precision"):
            s["openvino_default_precision"] = check["logits_sides"]["openvino-default"]["precision"]
    if s.get("openvino-default", {}).get("precision"):
        s["openvino_default_precision"] = s["openvino-default"]["precision"]
    return s


def old_summary(s):
    """A summary of a run from before the four sides (tessera, openvino) in today's keys."""
    if "openvino" in s and "sides" not in s:
        s["openvino-f32"] = s.pop("openvino")
        s["sides"] = ["tessera", "openvino-f32"]
        s["ratio_f32_best"], s["ratio_f32_median"] = s.get("ratio_best"), s.get("ratio_median")
        s["memory_ratio_f32"] = s.get("memory_ratio")
    return s


def table(header, summaries):
    def cell(v, fmt):
        return fmt.format(v) if v is not None else "n/a"

    def rate(s, side):
        v = s.get(side, {})
        return f"{cell(v.get('best'), '{:.2f}')} ({cell(v.get('median'), '{:.2f}')})"

    def ratio(s, name):
        return f"{cell(s.get(f'ratio_{name}_best'), '{:.2f}x')} ({cell(s.get(f'ratio_{name}_median'), '{:.2f}x')})"

    def bf16(v):
        if not v:
            return "n/a"
        if "rel" not in v:
            return "**failed**"
        return f"{v['rel']:.1e}, argmax {v['argmax_agree']:.0%}"

    sides = [side for side in SIDES if any(side in s.get("sides", []) for s in summaries)]
    if header and header.get("sides"):
        sides = [side for side in SIDES if side in header["sides"]] or sides
    ov_default = sorted({s["openvino_default_precision"] for s in summaries if s.get("openvino_default_precision")})
    if not ov_default and header and header.get("openvino_default_precision"):
        ov_default = [header["openvino_default_precision"]]
    isa = sorted({s["tessera-bf16"]["instruction_set"] for s in summaries
                  if s.get("tessera-bf16", {}).get("instruction_set")})
    lines = []
    if header:
        precisions = []
        if "tessera-bf16" in sides:
            precisions.append("Tessera bf16: `--amp bf16`" + (f" ({', '.join(isa)})" if isa else ""))
        if "openvino-default" in sides or ov_default:
            precisions.append(f"OpenVINO's default precision: {', '.join(ov_default) or '?'}")
        version = header.get("tessera_version", "").splitlines()
        lines.append(f"{header['cpu']}, {header['cores']} cores, {header['threads']} threads; batch {header['batch']} "
                     f"at 224x224; >= {header['seconds']:g} s per measurement, {header['rounds']} alternated "
                     f"rounds per side; {header['date']}; {version[0] if version else 'tessera ?'} "
                     f"({header.get('repo_head', '?')}), {header.get('openvino', 'OpenVINO ?')}, timm "
                     f"{header.get('timm', '?')} ONNX export (opset {header['opset']})"
                     + (f"; {'; '.join(precisions)}" if precisions else ""))
        lines.append("")
    ratios = [(name, title) for name, a, b, title in
              (("bf16", "tessera-bf16", "openvino-default", "Tessera bf16 / OpenVINO default"),
               ("f32", "tessera", "openvino-f32", "Tessera / OpenVINO f32")) if a in sides and b in sides]
    names = dict(SIDE_NAMES)
    if ov_default:
        names["openvino-default"] += f" ({', '.join(ov_default)})"
    lines.append("Images/s and their ratios, best (median) of the rounds:")
    lines.append("")
    lines.append("| model | " + " | ".join(names[side] for side in sides) + " | "
                 + "".join(f"{title} | " for _, title in ratios) + "CPU busy before (max) |")
    lines.append("|---|" + "---:|" * (len(sides) + len(ratios) + 1))
    for s in summaries:
        lines.append(f"| {s['model']} | " + " | ".join(rate(s, side) for side in sides) + " | "
                     + "".join(f"{ratio(s, name)} | " for name, _ in ratios)
                     + f"{cell(s.get('busy_before_max'), '{:.0%}')} |")
    lines.append("")
    checks_bf16 = "tessera-bf16" in sides or "openvino-default" in sides
    lines.append("Peak resident memory (MiB) and the logits" + (" (bf16 vs own f32: largest |logit difference| / "
                 "largest |timm logit|, and the share of images whose top class agrees):" if checks_bf16 else ":"))
    lines.append("")
    lines.append("| model | " + " | ".join(names[side] for side in sides) + " | f32 logits match |"
                 + (" Tessera bf16 vs f32 | OpenVINO default vs f32 | Tessera's no further |" if checks_bf16 else ""))
    lines.append("|---|" + "---:|" * len(sides) + "---|" + ("---:|---:|---|" if checks_bf16 else ""))
    for s in summaries:
        check = {True: "yes", False: "**no**", None: "not checked"}[s["check_ok"]]
        if s.get("check_rel") is not None:
            check += f" ({s['check_rel']:.1e})"
        row = (f"| {s['model']} | " + " | ".join(cell(s.get(side, {}).get("peak_memory_mib"), "{:.0f}")
                                               for side in sides) + f" | {check} |")
        if checks_bf16:
            further = {True: "yes", False: "**no**", None: "n/a"}[s.get("bf16_no_further")]
            row += (f" {bf16(s.get('tessera_bf16_vs_tessera_f32'))} | "
                    f"{bf16(s.get('openvino_default_vs_openvino_f32'))} | {further} |")
        lines.append(row)
    busiest = max((s.get("busy_before_max") or 0 for s in summaries), default=0)
    if busiest > 0.1:
        lines.append("")
        lines.append(f"Not a quiet machine: up to {busiest:.0%} of the CPU was busy in the half second before a "
                     "measurement started (other processes); these figures do not measure the sides alone.")
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
                    summaries.append(old_summary(r))
    print(table(header, summaries))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    ap.add_argument("models", nargs="*", default=DEFAULT_MODELS)
    ap.add_argument("--sides", default=",".join(SIDES),
                    help=f"what to run, in this order each round (comma-separated; default: all of {','.join(SIDES)})")
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
                    help="instead of timing: where each selected side spends one inference, per kernel (tessera "
                         "bench --profile) and per node (OpenVINO's PERF_COUNT), one after the other")
    ap.add_argument("--timm-path", default=os.path.join(CACHE, "timm"),
                    help="where timm is (installed there if missing)")
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
    ap.add_argument("--worker", choices=["export", "openvino", "openvino-info", "compare"], help=argparse.SUPPRESS)
    ap.add_argument("--ov-precision", choices=["f32", "default"], default="f32", help=argparse.SUPPRESS)
    ap.add_argument("--logits", action="append", default=[], help=argparse.SUPPRESS)
    ap.add_argument("--model", help=argparse.SUPPRESS)
    ap.add_argument("--out", help=argparse.SUPPRESS)
    ap.add_argument("--export-dir", help=argparse.SUPPRESS)
    ap.add_argument("--check", default="", help=argparse.SUPPRESS)
    args = ap.parse_args()

    if args.worker == "export":
        return worker_export(args)
    if args.worker == "openvino":
        return worker_openvino(args)
    if args.worker == "openvino-info":
        return worker_openvino_info(args)
    if args.worker == "compare":
        return worker_compare(args)
    if args.table:
        return print_table_from(args.table)
    sides = []
    for side in args.sides.split(","):
        side = side.strip()
        if side not in SIDES:
            ap.error(f"--sides: no side {side!r} (the sides: {', '.join(SIDES)})")
        if side not in sides:
            sides.append(side)
    args.sides = sides

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
        ov_version = run_json(["/usr/bin/python3", os.path.abspath(__file__), "--worker", "openvino-info"],
                              ov_env, 120, "openvino import")
        if ov_version is None:
            raise SystemExit(f"openvino does not import from {args.openvino_path}")
        head = subprocess.run(["git", "-C", REPO, "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True).stdout.strip()
        header = {"kind": "header", "cpu": cpu_name(), "cores": os.cpu_count(), "threads": args.threads,
                  "batch": args.batch, "seconds": args.seconds, "steps": args.steps, "rounds": args.rounds,
                  "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "sides": args.sides,
                  "openvino": f"OpenVINO {ov_version['openvino']}", "openvino_numpy": ov_version["numpy"],
                  "openvino_default_precision": ov_version.get("default_precision"),
                  "timm": timm_version(args.timm_path),
                  "opset": args.opset, "ov_hint": args.ov_hint, "ov_config": args.ov_config,
                  "tessera_binary": os.path.abspath(args.tessera), "tessera_version": t_version, "repo_head": head}
        emit(header)
        if args.markdown:
            print(f"{header['cpu']}: alternating {', '.join(args.sides)}, {args.rounds} rounds per model",
                  file=sys.stderr)
        summaries = []
        for model in args.models:
            d = export(args, model)
            if d is None:
                failed = True
                continue
            if args.profile:
                profile_sides(args, model, d, tessera, t_env, ov_env)
                continue
            check = None
            if not args.no_check:
                check = check_logits(args, model, d, tessera, t_env, ov_env, tmp)
                emit(check)
                if not check.get("ok"):
                    failed = True
                    log(f"{model}: the logits do not match: {json.dumps(check.get('diffs'))}")
                if check.get("bf16_no_further") is False:
                    log(f"{model}: Tessera's bf16 logits are further from its f32 ones than OpenVINO's: "
                        f"{json.dumps({n: check['diffs'][n] for n, _, _ in BF16_PAIRS})}")
            runs = []
            for rnd in range(args.rounds):
                for side in args.sides:
                    if side.startswith("tessera"):
                        cmd = tessera_cmd(tessera, "bench", model, args, side) + [
                            "--batch", str(args.batch), "--mode", "infer", "--seconds", str(args.seconds),
                            "--steps", str(args.steps), "--warmup", str(args.warmup), "--json"]
                        env = t_env
                    else:
                        cmd, env = ov_cmd(args, d, side), ov_env
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
            s = summarize(model, runs, check, args.sides)
            summaries.append(s)
            emit(s)
    if args.markdown:
        print(table(header, summaries))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
