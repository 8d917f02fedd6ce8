// CPU kernels of the optimizer family. A step reads and writes each parameter's few state arrays
// once, so it is bound by memory bandwidth: the tensors of a call are laid end to end and split
// evenly across threads by element count (many small biases cost no more than one big matrix),
// and each element is updated in one fused pass.
//
// The element math uses std::experimental::simd (libstdc++'s Parallelism TS v2) rather than Eigen:
// Eigen 3.4's AVX-512 sqrt under its default EIGEN_FAST_MATH is an rsqrt approximation, not the
// correctly rounded sqrt PyTorch uses (measured: a third of float inputs differ by an ulp), and
// GCC will not vectorise std::sqrt while it may set errno. Every element, the partial last vector
// of a span included (it goes through a padded buffer), is computed by the same vector code, so
// results are bitwise independent of how the work is split across threads.
#include <algorithm>
#include <array>
#include <atomic>
#include <cmath>
#include <experimental/simd>

#include "tessera/core/parallel.h"
#include "tessera/ops/cpu/kernels.h"
#include "tessera/ops/kernels/optim.h"

namespace tessera {

namespace {

namespace stdx = std::experimental;

constexpr int64_t kPiece = 4096;         // elements per call of a piece function
constexpr int64_t kGrain = 32768;        // fewer elements than this run on one thread
constexpr int64_t kReduceBlock = 65536;  // fixed reduction blocks (thread-count independent sums)

// Start offset of each tensor in the concatenation, plus the total at the end.
std::vector<int64_t> offsets(const std::vector<Tensor>& ts) {
  std::vector<int64_t> start(ts.size() + 1, 0);
  for (size_t i = 0; i < ts.size(); ++i) start[i + 1] = start[i] + ts[i].numel();
  return start;
}

// Calls fn(i, begin, end) for consecutive pieces [begin, end) of tensor i (at most kPiece
// elements, never crossing a tensor) covering the concatenated range [b, e).
template <class Fn>
void for_pieces(const std::vector<int64_t>& start, int64_t b, int64_t e, const Fn& fn) {
  size_t i = static_cast<size_t>(std::upper_bound(start.begin(), start.end(), b) - start.begin()) - 1;
  while (b < e) {
    while (start[i + 1] <= b) ++i;  // skips empty tensors
    const int64_t stop = std::min(e, start[i + 1]);
    for (int64_t s = b; s < stop; s += kPiece) fn(i, s - start[i], std::min(stop, s + kPiece) - start[i]);
    b = stop;
  }
}

// fn(i, begin, end) over every element of every tensor, in parallel.
template <class Fn>
void for_all_pieces(const std::vector<Tensor>& ts, const Fn& fn) {
  const std::vector<int64_t> start = offsets(ts);
  parallel_for(0, start.back(), kGrain, [&](int64_t b, int64_t e) { for_pieces(start, b, e, fn); });
}

template <class T>
std::vector<T*> pointers(const std::vector<Tensor>& ts) {
  std::vector<T*> out;
  out.reserve(ts.size());
  for (const Tensor& t : ts) out.push_back(t.data<T>());
  return out;
}

// Applies fn(outs, ins) to n elements, a vector at a time: `outs` are loaded from and stored back
// to the NOUT written arrays, `ins` loaded from the NIN read-only ones. The last partial vector is
// run through zero-padded buffers by the same code.
template <class T, size_t NOUT, size_t NIN, class Fn>
void simd_apply(const std::array<T*, NOUT>& out, const std::array<const T*, NIN>& in, int64_t n, const Fn& fn) {
  using Vec = stdx::native_simd<T>;
  constexpr int64_t W = static_cast<int64_t>(Vec::size());
  std::array<Vec, NOUT> o;
  std::array<Vec, NIN> x;
  int64_t i = 0;
  for (; i + W <= n; i += W) {
    for (size_t k = 0; k < NOUT; ++k) o[k].copy_from(out[k] + i, stdx::element_aligned);
    for (size_t k = 0; k < NIN; ++k) x[k].copy_from(in[k] + i, stdx::element_aligned);
    fn(o, x);
    for (size_t k = 0; k < NOUT; ++k) o[k].copy_to(out[k] + i, stdx::element_aligned);
  }
  if (i == n) return;
  const int64_t r = n - i;
  alignas(64) T buf[NOUT + NIN][W] = {};
  for (size_t k = 0; k < NOUT; ++k) std::copy(out[k] + i, out[k] + n, buf[k]);
  for (size_t k = 0; k < NIN; ++k) std::copy(in[k] + i, in[k] + n, buf[NOUT + k]);
  for (size_t k = 0; k < NOUT; ++k) o[k].copy_from(buf[k], stdx::element_aligned);
  for (size_t k = 0; k < NIN; ++k) x[k].copy_from(buf[NOUT + k], stdx::element_aligned);
  fn(o, x);
  for (size_t k = 0; k < NOUT; ++k) {
    o[k].copy_to(buf[k], stdx::element_aligned);
    std::copy(buf[k], buf[k] + r, out[k] + i);
  }
}

// The element formulas, each written once: the separate kernels (scale_, adamw_update_, lerp_)
// and the fused AdamW pass run the very same code.

// x ← x·f (scale_, and gradient clipping inside a fused step).
template <class T>
struct ScaleMath {
  using Vec = stdx::native_simd<T>;
  Vec f;
  explicit ScaleMath(double factor) : f(T(factor)) {}
  void operator()(std::array<Vec, 1>& o, const std::array<Vec, 0>&) const { o[0] = o[0] * f; }
};

// One Adam(W) step of (p, m, v) from g. Scalars in float64 first, then rounded to T once, as
// PyTorch passes Python floats to its ops.
template <class T>
struct AdamMath {
  using Vec = stdx::native_simd<T>;
  Vec b1, b2, one_b1, one_b2, eps, decay, step_size, bc2_sqrt, coupled_wd;
  bool coupled;
  AdamMath(const AdamConfig& c, double lr, double step) {
    struct HostMath {
      double pow(double x, double y) const { return std::pow(x, y); }
      double sqrt(double x) const { return std::sqrt(x); }
    };
    const AdamConstants<T> k = adam_constants<T>(c, lr, step, HostMath{});
    b1 = k.b1, b2 = k.b2, one_b1 = k.one_b1, one_b2 = k.one_b2, eps = k.eps, decay = k.decay;
    step_size = k.step_size, bc2_sqrt = k.bc2_sqrt, coupled_wd = k.coupled_wd, coupled = k.coupled;
  }
  void operator()(std::array<Vec, 3>& o, const std::array<Vec, 1>& x) const {
    auto& [P, M, V] = o;
    const Vec G = coupled ? x[0] + coupled_wd * P : x[0];  // Adam's L2 term
    M = b1 * M + one_b1 * G;
    V = b2 * V + one_b2 * (G * G);
    P = P * decay - step_size * (M / (stdx::sqrt(V) / bc2_sqrt + eps));
  }
};

// self ← lerp(self, end, weight) (lerp_, and the EMA inside a fused step).
template <class T>
struct LerpMath {
  using Vec = stdx::native_simd<T>;
  Vec w, w1;
  bool from_self;  // torch.lerp's choice of end, for accuracy near 0 and 1
  explicit LerpMath(double weight) : w(T(weight)), w1(T(1.0 - weight)), from_self(weight < 0.5) {}
  void operator()(std::array<Vec, 1>& o, const std::array<Vec, 1>& x) const {
    o[0] = from_self ? o[0] + w * (x[0] - o[0]) : x[0] - (x[0] - o[0]) * w1;
  }
};

// Between the stages of a fused piece: the compiler may not carry a value in a register from one
// stage into the next, so each stage reads what the previous one stored, rounded to T. Without
// it, a compiler that contracts a·b + c into a fused multiply-add (GCC does by default, and this
// file is not built with -ffp-contract=off) could fold the clipped gradient's product into Adam's
// L2 term, and the fused step would no longer equal scale_ followed by the step.
inline void stage_barrier() { asm volatile("" ::: "memory"); }

// One Adam(W) step over every tensor, piece by piece. With the work of `f`, a piece is: the
// gradient copied and scaled by ScaleMath (what scale_ would have stored), AdamMath's update of
// the parameter and its moments, then LerpMath moving the EMA towards the stored parameter. A
// piece (at most kPiece elements) stays in cache from stage to stage, so memory is read and
// written once.
template <class T>
void adam_typed(const AdamConfig& c, int64_t step, const std::vector<Tensor>& params, const std::vector<Tensor>& grads,
                const std::vector<Tensor>& exp_avgs, const std::vector<Tensor>& exp_avg_sqs, const AdamFusion& f) {
  const auto p = pointers<T>(params), g = pointers<T>(grads), m = pointers<T>(exp_avgs), v = pointers<T>(exp_avg_sqs);
  const auto ema = pointers<T>(f.emas);
  const bool clip = f.grad_scale.defined();
  const ScaleMath<T> scale(clip ? *f.grad_scale.data<double>() : 1.0);
  // Step values kept in a tensor (AdamFusion::step_values) are read now, when the step runs.
  const double* values = f.step_values.defined() ? f.step_values.data<double>() : nullptr;
  const AdamMath<T> adam(c, values ? values[0] : c.lr, values ? values[1] : static_cast<double>(step));
  const LerpMath<T> lerp(values ? values[2] : f.ema_weight);
  for_all_pieces(params, [&](size_t i, int64_t b, int64_t e) {
    const int64_t n = e - b;
    alignas(64) T scaled[kPiece];
    const T* grad = g[i] + b;
    if (clip) {
      std::copy(grad, grad + n, scaled);
      simd_apply<T, 1, 0>({scaled}, {}, n, scale);
      grad = scaled;
      stage_barrier();
    }
    simd_apply<T, 3, 1>({p[i] + b, m[i] + b, v[i] + b}, {grad}, n, adam);
    if (ema.empty()) return;
    stage_barrier();
    simd_apply<T, 1, 1>({ema[i] + b}, {p[i] + b}, n, lerp);
  });
}

}  // namespace

namespace cpu {

void adam(const AdamConfig& c, int64_t step, const std::vector<Tensor>& params, const std::vector<Tensor>& grads,
          const std::vector<Tensor>& exp_avgs, const std::vector<Tensor>& exp_avg_sqs, const AdamFusion& fusion) {
  TS_DISPATCH_FLOAT(params[0].dtype(), "adamw_update_",
                    [&] { adam_typed<scalar_t>(c, step, params, grads, exp_avgs, exp_avg_sqs, fusion); });
}

template <class T>
void sgd_typed(const SgdConfig& c, bool first_step, const std::vector<Tensor>& params, const std::vector<Tensor>& grads,
               const std::vector<Tensor>& bufs) {
  using Vec = stdx::native_simd<T>;
  const auto p = pointers<T>(params), g = pointers<T>(grads), buf = pointers<T>(bufs);
  const Vec lr(T(c.lr)), mom(T(c.momentum)), one_damp(T(1.0 - c.dampening)), wd(T(c.weight_decay));
  const bool decay = c.weight_decay != 0.0;
  for_all_pieces(params, [&](size_t i, int64_t b, int64_t e) {
    if (buf.empty()) {
      simd_apply<T, 1, 1>({p[i] + b}, {g[i] + b}, e - b, [&](std::array<Vec, 1>& o, const std::array<Vec, 1>& x) {
        const Vec D = decay ? x[0] + wd * o[0] : x[0];
        o[0] = o[0] - lr * D;
      });
      return;
    }
    simd_apply<T, 2, 1>({p[i] + b, buf[i] + b}, {g[i] + b}, e - b,
                        [&](std::array<Vec, 2>& o, const std::array<Vec, 1>& x) {
                          auto& [P, B] = o;
                          const Vec D = decay ? x[0] + wd * P : x[0];
                          B = first_step ? D : mom * B + one_damp * D;
                          P = P - lr * (c.nesterov ? D + mom * B : B);
                        });
  });
}

void sgd(const SgdConfig& c, bool first_step, const std::vector<Tensor>& params, const std::vector<Tensor>& grads,
         const std::vector<Tensor>& bufs) {
  TS_DISPATCH_FLOAT(params[0].dtype(), "sgd_update_", [&] { sgd_typed<scalar_t>(c, first_step, params, grads, bufs); });
}

// Σ x² of one span in float64. Eight independent accumulators, so the compiler vectorises the
// loop (float → double conversion included) without reassociating anything; Eigen's
// cast<double>().square().sum() measured 2-5x slower here.
template <class T>
double span_sum_squares(const T* x, int64_t n) {
  constexpr int kLanes = 8;
  double acc[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int j = 0; j < kLanes; ++j) acc[j] += static_cast<double>(x[i + j]) * static_cast<double>(x[i + j]);
  double total = 0.0;
  for (; i < n; ++i) total += static_cast<double>(x[i]) * static_cast<double>(x[i]);
  for (double a : acc) total += a;
  return total;
}

// Partial sums over fixed blocks of the concatenation, added in block order: the result depends
// on the data only, not on how blocks are spread over threads.
template <class T>
double sum_squares_typed(const std::vector<Tensor>& ts) {
  const auto x = pointers<T>(ts);
  const std::vector<int64_t> start = offsets(ts);
  const int64_t blocks = (start.back() + kReduceBlock - 1) / kReduceBlock;
  std::vector<double> partial(static_cast<size_t>(blocks), 0.0);
  parallel_for(0, blocks, 1, [&](int64_t k0, int64_t k1) {
    for (int64_t k = k0; k < k1; ++k) {
      double acc = 0.0;
      for_pieces(start, k * kReduceBlock, std::min(start.back(), (k + 1) * kReduceBlock),
                 [&](size_t i, int64_t b, int64_t e) { acc += span_sum_squares(x[i] + b, e - b); });
      partial[static_cast<size_t>(k)] = acc;
    }
  });
  double total = 0.0;
  for (double s : partial) total += s;
  return total;
}

void sum_squares(const std::vector<Tensor>& ts, const Tensor& out) {
  *out.data<double>() =
      TS_DISPATCH_FLOAT(ts[0].dtype(), "sum_of_squares", [&] { return sum_squares_typed<scalar_t>(ts); });
}

void scale(const std::vector<Tensor>& ts, const Tensor& factor_tensor) {
  const double factor = *factor_tensor.data<double>();
  TS_DISPATCH_FLOAT(ts[0].dtype(), "scale_", [&] {
    const auto x = pointers<scalar_t>(ts);
    const ScaleMath<scalar_t> math(factor);
    for_all_pieces(ts,
                   [&](size_t i, int64_t b, int64_t e) { simd_apply<scalar_t, 1, 0>({x[i] + b}, {}, e - b, math); });
  });
}

void unscale(const std::vector<Tensor>& grads, const Tensor& inv_scale, const Tensor& found_inf) {
  const double factor = *inv_scale.data<double>();
  std::atomic<bool> found{false};
  TS_DISPATCH_FLOAT(grads[0].dtype(), "unscale_", [&] {
    const auto x = pointers<scalar_t>(grads);
    const scalar_t f(factor);
    for_all_pieces(grads, [&](size_t i, int64_t b, int64_t e) {
      bool bad = false;
      for (int64_t k = b; k < e; ++k) {
        bad = bad || !std::isfinite(x[i][k]);
        x[i][k] *= f;
      }
      if (bad) found = true;
    });
  });
  *found_inf.data<double>() = found ? 1.0 : 0.0;
}

void lerp(const std::vector<Tensor>& selves, const std::vector<Tensor>& ends, double weight) {
  TS_DISPATCH_FLOAT(selves[0].dtype(), "lerp_", [&] {
    const auto s = pointers<scalar_t>(selves);
    const auto t = pointers<scalar_t>(ends);
    const LerpMath<scalar_t> math(weight);
    for_all_pieces(selves, [&](size_t i, int64_t b, int64_t e) {
      simd_apply<scalar_t, 1, 1>({s[i] + b}, {t[i] + b}, e - b, math);
    });
  });
}

}  // namespace cpu

}  // namespace tessera
