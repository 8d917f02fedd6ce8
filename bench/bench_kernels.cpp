// bench_kernels: times Tessera's core CPU kernels at ViT-S/16-like transformer shapes (batch 8,
// 197 tokens, width 384, 6 heads of 64) and a few ConvNet stem / depthwise convolutions, float32.
// bench/bench_kernels.py runs the same cases through PyTorch with the same method, and
// bench/compare.py puts the two side by side (scripts/bench.sh runs everything).
//
// Method, per case: `warmup` untimed calls, then `reps` timed calls; the reported time is the
// median. Forward is timed with autograd recording on (the inputs require grad, as in training).
// Backward is timed alone: each repetition clears the leaves' gradients and re-runs the forward
// untimed, then times y.backward(g) with a fixed random upstream gradient g.
// Throughput: GFLOP/s for GEMM and convolution (2·M·N·K multiply-adds counted as 2 flops; the
// backward counts the gradient GEMMs it actually performs), GB/s for the memory-bound kernels
// (softmax, layer norm, GELU: the float32 bytes of the tensors the kernel must read and write).
//
// Roofline: before the cases, the machine's single-precision peak is measured on the same threads
// (independent fused multiply-adds on the widest vectors the build targets, enough chains to hide
// the FMA latency), so each GFLOP/s figure can be read as a fraction of what the cores can do.
//
// Output: a human table on stdout and, with --json PATH, one JSON object per case and pass in
// PATH (the format bench/compare.py reads), plus a final {"summary": ...} line with the peak
// resident memory of the process (getrusage ru_maxrss) and the measured FMA peak.
#include <omp.h>
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "bench/fma_peak.h"
#include "tessera/core/parallel.h"
#include "tessera/ops/ops.h"

using namespace tessera;

namespace {

enum class Metric { Flops, Bytes };

struct Case {
  std::string name;
  std::string shape;  // human description of the operand shapes
  Metric metric;
  double fwd_work;  // flops or bytes of one forward call
  double bwd_work;  // flops or bytes of one backward call; 0 = forward only
  // Builds the leaves (those that take part in the backward require grad) ...
  std::function<std::vector<Tensor>(Generator&, bool needs_grad)> inputs;
  // ... and applies the op to them.
  std::function<Tensor(const std::vector<Tensor>&)> forward;
};

struct Options {
  int threads = 2;
  int reps = 20;
  int warmup = 3;
  std::vector<std::string> filters;  // substrings of case names; empty = all
  std::string json_path;
  bool list = false;  // print the case names and exit
};

constexpr double kF32 = 4.0;  // bytes per float32

// Leaf tensor of standard-normal values.
Tensor leaf(Generator& gen, const Shape& shape, bool requires_grad) {
  Tensor t = randn(shape, DType::Float32, &gen);
  if (requires_grad) t.set_requires_grad(true);
  return t;
}

double gemm_flops(double m, double n, double k) { return 2.0 * m * n * k; }

// Output extent of a convolution along one dim.
int64_t conv_out(int64_t in, int64_t k, int64_t stride, int64_t pad) { return (in + 2 * pad - k) / stride + 1; }

// A 3x3 convolution case with bias. `input_grad` = whether the input needs a gradient (not for an
// image fed to a stem), which decides whether the backward does the dX GEMM as well as dW.
Case conv_case(const std::string& name, Shape x_shape, int64_t out_ch, int64_t stride, int64_t groups,
               bool input_grad) {
  const int64_t n = x_shape[0], c = x_shape[1], h = x_shape[2], w = x_shape[3];
  const int64_t ho = conv_out(h, 3, stride, 1), wo = conv_out(w, 3, stride, 1);
  const double flops = gemm_flops(double(n) * ho * wo, double(out_ch), double(c / groups) * 9);
  std::ostringstream shape;
  shape << "x[" << n << "," << c << "," << h << "," << w << "] w[" << out_ch << "," << c / groups << ",3,3] s" << stride
        << " p1" << (groups > 1 ? " g" + std::to_string(groups) : "") << " -> [" << n << "," << out_ch << "," << ho
        << "," << wo << "]";
  Shape w_shape{out_ch, c / groups, 3, 3};
  return {name,
          shape.str(),
          Metric::Flops,
          flops,
          input_grad ? 2 * flops : flops,
          [=](Generator& g, bool rg) {
            return std::vector<Tensor>{leaf(g, x_shape, rg && input_grad), leaf(g, w_shape, rg), leaf(g, {out_ch}, rg)};
          },
          [=](const std::vector<Tensor>& in) {
            return conv2d(in[0], in[1], in[2], {stride, stride}, {1, 1}, {1, 1}, groups);
          }};
}

std::vector<Case> make_cases() {
  const int64_t B = 8, T = 197, D = 384, H = 6, Dh = 64, D3 = 3 * D, Dm = 4 * D;
  const int64_t M = B * T, BH = B * H;
  std::vector<Case> cases;

  // qkv projection: y = x·Wᵀ + b; its backward is dX = g·W and dW = gᵀ·x (timed below on their own).
  const double lin = gemm_flops(M, D3, D);
  cases.push_back({"linear", "x[1576,384] W[1152,384] b[1152] -> [1576,1152]", Metric::Flops, lin, 2 * lin,
                   [=](Generator& g, bool rg) {
                     return std::vector<Tensor>{leaf(g, {M, D}, rg), leaf(g, {D3, D}, rg), leaf(g, {D3}, rg)};
                   },
                   [](const std::vector<Tensor>& in) { return linear(in[0], in[1], in[2]); }});
  cases.push_back({"matmul_dX", "g[1576,1152] @ W[1152,384]", Metric::Flops, lin, 0,
                   [=](Generator& g, bool) {
                     return std::vector<Tensor>{leaf(g, {M, D3}, false), leaf(g, {D3, D}, false)};
                   },
                   [](const std::vector<Tensor>& in) { return matmul(in[0], in[1]); }});
  cases.push_back({"matmul_dW", "g[1576,1152]^T @ x[1576,384] (transposed view)", Metric::Flops, lin, 0,
                   [=](Generator& g, bool) {
                     return std::vector<Tensor>{leaf(g, {M, D3}, false), leaf(g, {M, D}, false)};
                   },
                   [](const std::vector<Tensor>& in) { return matmul(in[0].t(), in[1]); }});

  // attention: scores = q·kᵀ (k transposed as a view, as in the model), out = attn·v.
  const double att = gemm_flops(double(BH) * T, T, Dh);
  cases.push_back({"bmm_qk", "q[48,197,64] @ k[48,197,64]^T -> [48,197,197]", Metric::Flops, att, 2 * att,
                   [=](Generator& g, bool rg) {
                     return std::vector<Tensor>{leaf(g, {BH, T, Dh}, rg), leaf(g, {BH, T, Dh}, rg)};
                   },
                   [](const std::vector<Tensor>& in) { return matmul(in[0], in[1].transpose(-2, -1)); }});
  cases.push_back({"bmm_av", "attn[48,197,197] @ v[48,197,64] -> [48,197,64]", Metric::Flops, att, 2 * att,
                   [=](Generator& g, bool rg) {
                     return std::vector<Tensor>{leaf(g, {BH, T, T}, rg), leaf(g, {BH, T, Dh}, rg)};
                   },
                   [](const std::vector<Tensor>& in) { return matmul(in[0], in[1]); }});

  cases.push_back(conv_case("conv_stem", {8, 3, 224, 224}, 48, 2, 1, /*input_grad=*/false));
  cases.push_back(conv_case("conv_s2", {8, 48, 112, 112}, 96, 2, 1, true));
  cases.push_back(conv_case("dwconv_384", {8, 384, 14, 14}, 384, 1, 384, true));
  cases.push_back(conv_case("dwconv_192", {8, 192, 28, 28}, 192, 1, 192, true));

  // Memory-bound kernels: forward reads x and writes y; backward reads the saved tensor and g and
  // writes dx (the affine parameters' traffic is negligible).
  const double sm = double(BH) * T * T * kF32;
  cases.push_back({"softmax", "[9456,197] dim=-1", Metric::Bytes, 2 * sm, 3 * sm,
                   [=](Generator& g, bool rg) {
                     return std::vector<Tensor>{leaf(g, {BH * T, T}, rg)};
                   },
                   [](const std::vector<Tensor>& in) { return softmax(in[0], -1); }});
  const double ln = double(M) * D * kF32;
  cases.push_back({"layer_norm", "[1576,384] affine", Metric::Bytes, 2 * ln, 3 * ln,
                   [=](Generator& g, bool rg) {
                     return std::vector<Tensor>{leaf(g, {M, D}, rg), leaf(g, {D}, rg), leaf(g, {D}, rg)};
                   },
                   [](const std::vector<Tensor>& in) { return layer_norm(in[0], in[1], in[2], 1e-6); }});
  const double ge = double(M) * Dm * kF32;
  cases.push_back({"gelu", "[1576,1536] erf", Metric::Bytes, 2 * ge, 3 * ge,
                   [=](Generator& g, bool rg) {
                     return std::vector<Tensor>{leaf(g, {M, Dm}, rg)};
                   },
                   [](const std::vector<Tensor>& in) { return gelu(in[0]); }});

  // Fused attention steps (ops/fused.h), each beside the composition of ops it replaces ("_ops").
  // CoaT-Lite Small's first stage: 56x56 tokens and a CLS token, 8 heads of 8 channels; q is a
  // slice of the qkv projection. Work: bytes of m, q, cv read and y written (backward: g, q, cv
  // read, three gradients written).
  const int64_t Nc = 1 + 56 * 56, Hc = 8, dc = 8;
  const double merge = double(B) * Nc * Hc * dc * kF32;
  auto merge_inputs = [=](Generator& g, bool rg) {
    return std::vector<Tensor>{leaf(g, {B, Hc, Nc, dc}, rg), leaf(g, {B, Nc, 3, Hc, dc}, rg),
                               leaf(g, {B, Hc, Nc - 1, dc}, rg)};
  };
  auto coat_q = [](const Tensor& qkv) { return qkv.permute({2, 0, 3, 1, 4}).select(0, 0); };
  const double merge_scale = 1.0 / std::sqrt(double(dc));
  cases.push_back({"coat_merge", "m,q[8,8,3137,8] cv[8,8,3136,8] -> [8,3137,64] (fused)", Metric::Bytes, 4 * merge,
                   6 * merge, merge_inputs, [=](const std::vector<Tensor>& in) {
                     return factor_attention_merge(in[0], coat_q(in[1]), in[2], merge_scale);
                   }});
  cases.push_back({"coat_merge_ops", "the same as ops: scale, product, pad, add, merge heads", Metric::Bytes, 4 * merge,
                   6 * merge, merge_inputs, [=](const std::vector<Tensor>& in) {
                     const Tensor q = coat_q(in[1]);
                     const Tensor ev = pad(q.narrow(2, 1, Nc - 1) * in[2], {0, 0, 1, 0});
                     return (in[0] * merge_scale + ev).transpose(1, 2).reshape({B, Nc, Hc * dc});
                   }});
  // CaiT-S24's class attention: 197 tokens, 8 heads of 48; k and v slices of their projections.
  // Work: bytes of k and v read (backward: also gk and gv written).
  const int64_t Ha = 8, da = D / Ha;
  const double kv = 2.0 * B * T * D * kF32;
  auto class_inputs = [=](Generator& g, bool rg) {
    return std::vector<Tensor>{leaf(g, {B, Ha, 1, da}, rg), leaf(g, {B, T, Ha, da}, rg), leaf(g, {B, T, Ha, da}, rg)};
  };
  const double class_scale = 1.0 / std::sqrt(double(da));
  cases.push_back({"class_attn", "q[8,8,1,48] k,v[8,8,197,48] -> [8,8,1,48] (fused)", Metric::Bytes, kv, 2 * kv,
                   class_inputs, [=](const std::vector<Tensor>& in) {
                     return class_attention(in[0], in[1].transpose(1, 2), in[2].transpose(1, 2), class_scale);
                   }});
  cases.push_back({"class_attn_ops", "the same as ops: scale, q·kᵀ, softmax, ·v", Metric::Bytes, kv, 2 * kv,
                   class_inputs, [=](const std::vector<Tensor>& in) {
                     const Tensor a = softmax(matmul(in[0] * class_scale, in[1].transpose(1, 2).transpose(-2, -1)), -1);
                     return matmul(a, in[2].transpose(1, 2));
                   }});
  // UFO-ViT's output XN(q)·ctx with the heads merged: 197 tokens, 6 heads of 64; q a qkv slice.
  const double ufo = gemm_flops(double(BH) * T, Dh, Dh);
  auto ufo_inputs = [=](Generator& g, bool rg) {
    return std::vector<Tensor>{leaf(g, {B, T, 3, H, Dh}, rg), leaf(g, {B, H, Dh, Dh}, rg), leaf(g, {H, 1, 1}, rg)};
  };
  auto ufo_q = [](const Tensor& qkv) { return qkv.permute({2, 0, 3, 1, 4}).select(0, 0); };
  cases.push_back({"ufo_out", "XN(q[8,6,197,64])·ctx[8,6,64,64] -> [8,197,384] (fused)", Metric::Flops, ufo, 2 * ufo,
                   ufo_inputs, [=](const std::vector<Tensor>& in) {
                     return xnorm_matmul(ufo_q(in[0]), in[1], in[2]).transpose(1, 2).reshape({B, T, D});
                   }});
  cases.push_back({"ufo_out_ops", "the same as ops: normalize, gamma, matmul, merge heads", Metric::Flops, ufo, 2 * ufo,
                   ufo_inputs, [=](const std::vector<Tensor>& in) {
                     return matmul(in[2] * normalize(ufo_q(in[0]), -1), in[1]).transpose(1, 2).reshape({B, T, D});
                   }});
  return cases;
}

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t0) { return std::chrono::duration<double, std::milli>(Clock::now() - t0).count(); }

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

double peak_rss_mb() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return ru.ru_maxrss / 1024.0;  // Linux reports kilobytes
}

// Times `fn` (which returns the milliseconds of its timed part) and returns all timed samples.
std::vector<double> sample(const Options& opt, const std::function<double()>& fn) {
  for (int i = 0; i < opt.warmup; ++i) fn();
  std::vector<double> ms;
  for (int i = 0; i < opt.reps; ++i) ms.push_back(fn());
  return ms;
}

struct Result {
  std::string name, pass, shape, unit;
  double median_ms, min_ms, throughput, rss_mb;
};

// Times one pass of a case. The forward runs with autograd recording whenever the case has a
// backward (that is the training forward); the backward is timed without the forward before it.
Result measure(const Case& c, const Options& opt, Generator& gen, bool backward) {
  std::vector<Tensor> in = c.inputs(gen, c.bwd_work > 0);
  Tensor g;
  if (backward) {
    NoGradGuard no_grad;
    g = randn(c.forward(in).shape(), DType::Float32, &gen);
  }
  std::vector<double> ms = sample(opt, [&] {
    if (!backward) {
      auto t0 = Clock::now();
      Tensor y = c.forward(in);
      return ms_since(t0);  // y and its graph are freed after the clock stopped
    }
    for (const Tensor& t : in) t.set_grad(Tensor());
    Tensor y = c.forward(in);
    auto t0 = Clock::now();
    y.backward(g);
    return ms_since(t0);
  });
  const double med = median(ms);
  return {c.name,
          backward ? "bwd" : "fwd",
          c.shape,
          c.metric == Metric::Flops ? "GFLOP/s" : "GB/s",
          med,
          *std::min_element(ms.begin(), ms.end()),
          (backward ? c.bwd_work : c.fwd_work) / (med * 1e6),
          peak_rss_mb()};
}

bool selected(const Case& c, const Options& opt) {
  if (opt.filters.empty()) return true;
  for (const std::string& f : opt.filters)
    if (c.name.find(f) != std::string::npos) return true;
  return false;
}

[[noreturn]] void usage_error(const std::string& msg) {
  std::cerr
      << "bench_kernels: " << msg << "\n"
      << "usage: bench_kernels [--threads N] [--reps N] [--warmup N] [--filter NAME[,NAME...]] [--json PATH] [--list]\n"
      << "  --threads N   CPU threads (default 2)\n"
      << "  --reps N      timed repetitions per case, median reported (default 20)\n"
      << "  --warmup N    untimed repetitions before timing (default 3)\n"
      << "  --filter S    run only cases whose name contains one of the comma-separated substrings\n"
      << "  --json PATH   also write one JSON object per case to PATH\n"
      << "  --list        print the case names and exit\n";
  std::exit(2);
}

int parse_int(const std::string& flag, const char* text, int min) {
  char* end = nullptr;
  long v = std::strtol(text, &end, 10);
  if (end == text || *end != '\0' || v < min || v > 1000000)
    usage_error(flag + " expects an integer >= " + std::to_string(min) + ", got '" + text + "'");
  return static_cast<int>(v);
}

Options parse(int argc, char** argv) {
  Options opt;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "-h" || a == "--help") usage_error("help");
    if (a == "--list") {
      opt.list = true;
      continue;
    }
    if (i + 1 >= argc) usage_error("unknown option or missing value: '" + a + "'");
    const char* v = argv[++i];
    if (a == "--threads") opt.threads = parse_int(a, v, 1);
    else if (a == "--reps") opt.reps = parse_int(a, v, 1);
    else if (a == "--warmup") opt.warmup = parse_int(a, v, 0);
    else if (a == "--json") opt.json_path = v;
    else if (a == "--filter") {
      std::stringstream ss(v);
      for (std::string part; std::getline(ss, part, ',');)
        if (!part.empty()) opt.filters.push_back(part);
    } else usage_error("unknown option '" + a + "'");
  }
  return opt;
}

std::string json_line(const Result& r, const Options& opt) {
  std::ostringstream os;
  os.precision(6);
  os << "{\"impl\": \"tessera\", \"case\": \"" << r.name << "\", \"pass\": \"" << r.pass << "\", \"shape\": \""
     << r.shape << "\", \"median_ms\": " << r.median_ms << ", \"min_ms\": " << r.min_ms << ", \"unit\": \"" << r.unit
     << "\", \"throughput\": " << r.throughput << ", \"reps\": " << opt.reps << ", \"threads\": " << opt.threads
     << ", \"peak_rss_mb\": " << r.rss_mb << "}";
  return os.str();
}

}  // namespace

int main(int argc, char** argv) {
  Options opt = parse(argc, argv);
  set_num_threads(opt.threads);
  std::vector<Case> cases = make_cases();
  if (opt.list) {
    for (const Case& c : cases) std::printf("%s\n", c.name.c_str());
    return 0;
  }
  std::ofstream json;
  if (!opt.json_path.empty()) {
    json.open(opt.json_path);
    if (!json) usage_error("cannot write --json file '" + opt.json_path + "'");
  }
  if (std::none_of(cases.begin(), cases.end(), [&](const Case& c) { return selected(c, opt); }))
    usage_error("--filter matches no case");

  std::printf("tessera bench_kernels: float32, %d thread(s), median of %d reps after %d warm-up\n", opt.threads,
              opt.reps, opt.warmup);
  const double peak = fma_peak_gflops(opt.threads);
  std::printf("measured float32 FMA peak: %.1f GFLOP/s on %d thread(s)\n", peak, opt.threads);
  std::printf("%-11s %-4s %10s %12s %7s  %s\n", "case", "pass", "median ms", "throughput", "of peak", "shape");
  Generator gen(1234);
  try {
    for (const Case& c : cases) {
      if (!selected(c, opt)) continue;
      std::vector<Result> rs{measure(c, opt, gen, false)};
      if (c.bwd_work > 0) rs.push_back(measure(c, opt, gen, true));
      for (const Result& r : rs) {
        const std::string of_peak =
            r.unit == "GFLOP/s" ? std::to_string(static_cast<int>(std::lround(100 * r.throughput / peak))) + "%" : "";
        std::printf("%-11s %-4s %10.3f %7.1f %-6s %5s  %s\n", r.name.c_str(), r.pass.c_str(), r.median_ms, r.throughput,
                    r.unit.c_str(), of_peak.c_str(), r.shape.c_str());
        std::fflush(stdout);
        if (json) json << json_line(r, opt) << "\n";
      }
    }
  } catch (const Error& e) {
    std::fprintf(stderr, "bench_kernels: error: %s\n", e.what());
    return 1;
  }
  const double rss = peak_rss_mb();
  std::printf("peak resident memory: %.1f MB\n", rss);
  if (json)
    json << "{\"summary\": true, \"impl\": \"tessera\", \"peak_rss_mb\": " << rss << ", \"fma_peak_gflops\": " << peak
         << "}\n";
  return 0;
}
