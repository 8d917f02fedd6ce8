#!/usr/bin/env python3
"""Side-by-side table of bench/bench_kernels (Tessera) and bench/bench_kernels.py (PyTorch) results.

Reads the JSON-lines files both benchmarks write with --json. Several files per side (repeated
runs) are allowed: for each case and pass the best run of each side (lowest median time) is kept.
The ratio is Tessera's throughput over PyTorch's: above 1 Tessera is faster, below 1 slower.
GFLOP/s cases also show each side's share of the cores' float32 FMA peak, which bench_kernels
measures on the same threads before its cases (the roofline of a GEMM).

usage: compare.py --tessera RUN.jsonl [RUN.jsonl ...] --pytorch RUN.jsonl [RUN.jsonl ...] [--markdown]
"""
import argparse
import json
import sys


def load(paths):
    """Best record per (case, pass) over the runs in `paths`, in first-seen order; the peak RSS
    (the largest of a run's processes - one per case with bench.sh --wait-idle -, smallest over runs);
    and the highest FMA peak measured (Tessera's runs only)."""
    best, rss, peaks = {}, [], []
    for path in paths:
        run_rss = []
        with open(path) as f:
            for line in f:
                if not line.strip():
                    continue
                rec = json.loads(line)
                if rec.get("summary"):
                    run_rss.append(rec["peak_rss_mb"])
                    if "fma_peak_gflops" in rec:
                        peaks.append(rec["fma_peak_gflops"])
                    continue
                key = (rec["case"], rec["pass"])
                if key not in best or rec["median_ms"] < best[key]["median_ms"]:
                    best[key] = rec
        if run_rss:
            rss.append(max(run_rss))
    return best, (min(rss) if rss else None), (max(peaks) if peaks else None)


def fmt(x, spec):
    return "-" if x is None else format(x, spec)


def main():
    p = argparse.ArgumentParser(description="Compare Tessera and PyTorch kernel benchmark results.")
    p.add_argument("--tessera", nargs="+", required=True, help="JSON-lines files from bench_kernels --json")
    p.add_argument("--pytorch", nargs="+", required=True, help="JSON-lines files from bench_kernels.py --json")
    p.add_argument("--markdown", action="store_true", help="print a Markdown table (for docs/benchmarks.md)")
    args = p.parse_args()
    try:
        ts, ts_rss, peak = load(args.tessera)
        pt, pt_rss, _ = load(args.pytorch)
    except (OSError, ValueError, KeyError) as e:
        p.error(f"cannot read results: {e}")

    keys = list(ts) + [k for k in pt if k not in ts]
    rows = []
    for key in keys:
        t, q = ts.get(key), pt.get(key)
        ref = t or q
        ratio = t["throughput"] / q["throughput"] if t and q else None
        def of_peak(r):
            return f"{100 * r['throughput'] / peak:.0f}%" if r and peak and ref["unit"] == "GFLOP/s" else "-"
        rows.append([key[0], key[1], ref["shape"], ref["unit"],
                     t["median_ms"] if t else None, q["median_ms"] if q else None,
                     t["throughput"] if t else None, q["throughput"] if q else None, ratio, of_peak(t), of_peak(q)])

    head = ["case", "pass", "unit", "tessera ms", "pytorch ms", "tessera thr", "pytorch thr", "ratio"]
    if args.markdown:
        print("| case | pass | shape | tessera ms | pytorch ms | tessera | pytorch | unit | ratio "
              "| tessera of peak | pytorch of peak |")
        print("|---|---|---|---:|---:|---:|---:|---|---:|---:|---:|")
        for r in rows:
            print(f"| {r[0]} | {r[1]} | {r[2]} | {fmt(r[4], '.3f')} | {fmt(r[5], '.3f')} | {fmt(r[6], '.1f')} | "
                  f"{fmt(r[7], '.1f')} | {r[3]} | {fmt(r[8], '.2f')} | {r[9]} | {r[10]} |")
    else:
        print(f"{head[0]:<11} {head[1]:<4} {head[2]:<7} {head[3]:>11} {head[4]:>11} {head[5]:>12} "
              f"{head[6]:>12} {head[7]:>6}  of peak (t/p)")
        for r in rows:
            print(f"{r[0]:<11} {r[1]:<4} {r[3]:<7} {fmt(r[4], '11.3f')} {fmt(r[5], '11.3f')} "
                  f"{fmt(r[6], '12.1f')} {fmt(r[7], '12.1f')} {fmt(r[8], '6.2f')}  {r[9]}/{r[10]}")
    print()
    if peak:
        print(f"measured float32 FMA peak: {peak:.1f} GFLOP/s (bench_kernels, same threads)")
    print(f"peak resident memory: tessera {fmt(ts_rss, '.1f')} MB, pytorch {fmt(pt_rss, '.1f')} MB "
          "(pytorch includes the interpreter and libtorch)")
    print("ratio = tessera throughput / pytorch throughput (> 1: tessera faster); best run per side")
    return 0


if __name__ == "__main__":
    sys.exit(main())
