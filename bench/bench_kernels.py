#!/usr/bin/python3
"""PyTorch reference for bench/bench_kernels.cpp: the same cases, shapes, timing method and output.

Method, per case: `warmup` untimed calls, then `reps` timed calls; the median is reported. Forward
is timed with autograd recording on (the inputs require grad, as in training). Backward is timed
alone: each repetition clears the leaves' gradients and re-runs the forward untimed, then times
y.backward(g) with a fixed random upstream gradient g. Throughput: GFLOP/s for GEMM/convolution,
GB/s (float32 bytes read + written) for softmax, layer norm and GELU - see the C++ file for the
exact work counted per case, which this file mirrors.

Run with Debian's torch: /usr/bin/python3 bench/bench_kernels.py [--threads N] [--reps N]
[--warmup N] [--filter a,b] [--json PATH] [--list]
"""
import argparse
import json
import resource
import statistics
import sys
import time

import torch
import torch.nn.functional as F

F32 = 4.0  # bytes per float32


class Case:
    def __init__(self, name, shape, metric, fwd_work, bwd_work, inputs, forward):
        self.name, self.shape, self.metric = name, shape, metric
        self.fwd_work, self.bwd_work = fwd_work, bwd_work  # bwd_work 0 = forward only
        self.inputs = inputs  # (needs_grad) -> list of leaf tensors
        self.forward = forward  # (list of leaves) -> output


def leaf(shape, requires_grad):
    return torch.randn(*shape, dtype=torch.float32).requires_grad_(requires_grad)


def gemm_flops(m, n, k):
    return 2.0 * m * n * k


def conv_case(name, x_shape, out_ch, stride, groups, input_grad):
    n, c, h, w = x_shape
    ho, wo = (h + 2 - 3) // stride + 1, (w + 2 - 3) // stride + 1
    flops = gemm_flops(n * ho * wo, out_ch, (c // groups) * 9)
    shape = f"x[{n},{c},{h},{w}] w[{out_ch},{c // groups},3,3] s{stride} p1" + (
        f" g{groups}" if groups > 1 else "") + f" -> [{n},{out_ch},{ho},{wo}]"
    return Case(name, shape, "flops", flops, 2 * flops if input_grad else flops,
                lambda rg: [leaf(x_shape, rg and input_grad), leaf((out_ch, c // groups, 3, 3), rg),
                            leaf((out_ch,), rg)],
                lambda t: F.conv2d(t[0], t[1], t[2], stride=stride, padding=1, groups=groups))


def make_cases():
    B, T, D, H, Dh = 8, 197, 384, 6, 64
    D3, Dm, M, BH = 3 * D, 4 * D, B * T, B * H
    lin = gemm_flops(M, D3, D)
    att = gemm_flops(BH * T, T, Dh)
    sm = BH * T * T * F32
    ln = M * D * F32
    ge = M * Dm * F32
    return [
        Case("linear", "x[1576,384] W[1152,384] b[1152] -> [1576,1152]", "flops", lin, 2 * lin,
             lambda rg: [leaf((M, D), rg), leaf((D3, D), rg), leaf((D3,), rg)],
             lambda t: F.linear(t[0], t[1], t[2])),
        Case("matmul_dX", "g[1576,1152] @ W[1152,384]", "flops", lin, 0,
             lambda rg: [leaf((M, D3), False), leaf((D3, D), False)],
             lambda t: torch.matmul(t[0], t[1])),
        Case("matmul_dW", "g[1576,1152]^T @ x[1576,384] (transposed view)", "flops", lin, 0,
             lambda rg: [leaf((M, D3), False), leaf((M, D), False)],
             lambda t: torch.matmul(t[0].t(), t[1])),
        Case("bmm_qk", "q[48,197,64] @ k[48,197,64]^T -> [48,197,197]", "flops", att, 2 * att,
             lambda rg: [leaf((BH, T, Dh), rg), leaf((BH, T, Dh), rg)],
             lambda t: torch.matmul(t[0], t[1].transpose(-2, -1))),
        Case("bmm_av", "attn[48,197,197] @ v[48,197,64] -> [48,197,64]", "flops", att, 2 * att,
             lambda rg: [leaf((BH, T, T), rg), leaf((BH, T, Dh), rg)],
             lambda t: torch.matmul(t[0], t[1])),
        conv_case("conv_stem", (8, 3, 224, 224), 48, 2, 1, input_grad=False),
        conv_case("conv_s2", (8, 48, 112, 112), 96, 2, 1, True),
        conv_case("dwconv_384", (8, 384, 14, 14), 384, 1, 384, True),
        conv_case("dwconv_192", (8, 192, 28, 28), 192, 1, 192, True),
        Case("softmax", "[9456,197] dim=-1", "bytes", 2 * sm, 3 * sm,
             lambda rg: [leaf((BH * T, T), rg)],
             lambda t: torch.softmax(t[0], -1)),
        Case("layer_norm", "[1576,384] affine", "bytes", 2 * ln, 3 * ln,
             lambda rg: [leaf((M, D), rg), leaf((D,), rg), leaf((D,), rg)],
             lambda t: F.layer_norm(t[0], (D,), t[1], t[2], 1e-6)),
        Case("gelu", "[1576,1536] erf", "bytes", 2 * ge, 3 * ge,
             lambda rg: [leaf((M, Dm), rg)],
             lambda t: F.gelu(t[0])),
    ] + fused_attention_cases(B, T, D, H, Dh)


def fused_attention_cases(B, T, D, H, Dh):
    """Tessera's fused attention steps and their compositions ("_ops"): PyTorch runs the
    composition, as timm does, under both names."""
    Nc, Hc, dc = 1 + 56 * 56, 8, 8
    merge = B * Nc * Hc * dc * F32
    merge_scale = dc ** -0.5

    def coat_merge(t):
        q = t[1].permute(2, 0, 3, 1, 4)[0]
        ev = F.pad(q[:, :, 1:] * t[2], (0, 0, 1, 0))
        return (t[0] * merge_scale + ev).transpose(1, 2).reshape(B, Nc, Hc * dc)

    def merge_inputs(rg):
        return [leaf((B, Hc, Nc, dc), rg), leaf((B, Nc, 3, Hc, dc), rg), leaf((B, Hc, Nc - 1, dc), rg)]

    Ha = 8
    da = D // Ha
    kv = 2.0 * B * T * D * F32
    class_scale = da ** -0.5

    def class_attn(t):
        k, v = t[1].transpose(1, 2), t[2].transpose(1, 2)
        return torch.softmax((t[0] * class_scale) @ k.transpose(-2, -1), -1) @ v

    def class_inputs(rg):
        return [leaf((B, Ha, 1, da), rg), leaf((B, T, Ha, da), rg), leaf((B, T, Ha, da), rg)]

    ufo = gemm_flops(B * H * T, Dh, Dh)

    def ufo_out(t):
        q = t[0].permute(2, 0, 3, 1, 4)[0]
        return torch.matmul(t[2] * F.normalize(q, dim=-1), t[1]).transpose(1, 2).reshape(B, T, D)

    def ufo_inputs(rg):
        return [leaf((B, T, 3, H, Dh), rg), leaf((B, H, Dh, Dh), rg), leaf((H, 1, 1), rg)]

    cases = []
    for suffix in ("", "_ops"):
        cases += [
            Case("coat_merge" + suffix, "m,q[8,8,3137,8] cv[8,8,3136,8] -> [8,3137,64]", "bytes", 4 * merge,
                 6 * merge, merge_inputs, coat_merge),
            Case("class_attn" + suffix, "q[8,8,1,48] k,v[8,8,197,48] -> [8,8,1,48]", "bytes", kv, 2 * kv,
                 class_inputs, class_attn),
            Case("ufo_out" + suffix, "XN(q[8,6,197,64])·ctx[8,6,64,64] -> [8,197,384]", "flops", ufo, 2 * ufo,
                 ufo_inputs, ufo_out),
        ]
    return cases


def peak_rss_mb():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0  # Linux: kilobytes


def measure(case, args, backward):
    """Times one pass of a case; returns (median_ms, min_ms)."""
    inputs = case.inputs(case.bwd_work > 0)
    if backward:
        with torch.no_grad():
            g = torch.randn(case.forward(inputs).shape)

    def once():
        if not backward:
            t0 = time.perf_counter()
            y = case.forward(inputs)
            t = time.perf_counter() - t0
            del y  # freed after the clock stopped, as in the C++ benchmark
            return t * 1e3
        for t in inputs:
            t.grad = None
        y = case.forward(inputs)
        t0 = time.perf_counter()
        y.backward(g)
        return (time.perf_counter() - t0) * 1e3

    for _ in range(args.warmup):
        once()
    ms = [once() for _ in range(args.reps)]
    return statistics.median(ms), min(ms)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--reps", type=int, default=20)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--filter", default="", help="comma-separated substrings of case names")
    p.add_argument("--json", default="", help="also write one JSON object per case to this path")
    p.add_argument("--list", action="store_true", help="print the case names and exit")
    args = p.parse_args()
    if args.list:
        print("\n".join(c.name for c in make_cases()))
        return 0
    if args.threads < 1 or args.reps < 1 or args.warmup < 0:
        p.error("--threads and --reps must be >= 1, --warmup >= 0")
    torch.set_num_threads(args.threads)
    torch.manual_seed(1234)
    filters = [f for f in args.filter.split(",") if f]
    cases = [c for c in make_cases() if not filters or any(f in c.name for f in filters)]
    if not cases:
        p.error("--filter matches no case")
    out = open(args.json, "w") if args.json else None

    print(f"pytorch {torch.__version__} bench_kernels: float32, {torch.get_num_threads()} thread(s), "
          f"median of {args.reps} reps after {args.warmup} warm-up")
    print(f"{'case':<11} {'pass':<4} {'median ms':>10} {'throughput':>12}  shape")
    for c in cases:
        for backward in ([False, True] if c.bwd_work > 0 else [False]):
            med, mn = measure(c, args, backward)
            work = c.bwd_work if backward else c.fwd_work
            unit = "GFLOP/s" if c.metric == "flops" else "GB/s"
            rec = {"impl": "pytorch", "case": c.name, "pass": "bwd" if backward else "fwd", "shape": c.shape,
                   "median_ms": med, "min_ms": mn, "unit": unit, "throughput": work / (med * 1e6),
                   "reps": args.reps, "threads": torch.get_num_threads(), "peak_rss_mb": peak_rss_mb()}
            print(f"{c.name:<11} {rec['pass']:<4} {med:10.3f} {rec['throughput']:7.1f} {unit:<6} {c.shape}",
                  flush=True)
            if out:
                out.write(json.dumps(rec) + "\n")
    rss = peak_rss_mb()
    print(f"peak resident memory: {rss:.1f} MB (includes the Python interpreter and libtorch)")
    if out:
        out.write(json.dumps({"summary": True, "impl": "pytorch", "peak_rss_mb": rss}) + "\n")
        out.close()


if __name__ == "__main__":
    sys.exit(main())
