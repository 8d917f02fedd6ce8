// Depthwise convolution on the CPU (one input channel per group, Cg == 1), computed directly:
// with a handful of multiply-adds per output, im2col + GEMM would mostly move memory.
//
// Every plane is processed on a zero-padded copy of its input plane [Hp, Wp], so kernel tap
// (i, j) reads at the fixed offset i·dh·Wp + j·dw from an output position's window origin and no
// bounds checks remain. Output planes live in a work buffer with row pitch `pitch`. For stride 1
// the pitch is Wp, so the window origin of output (r, q) has the same flat index r·Wp + q in the
// work buffer and in the padded plane, and each tap is ONE contiguous multiply-add over the whole
// plane, rounded up to whole SIMD packets (the Wp − OW columns past OW of each work row, and the
// rounding, are scratch). Other strides use pitch OW and go row by row. depthwise_conv2d_gelu
// applies GELU (or, for its backward, g·gelu') to the work rows before they are written.
//
// Gradients, stride 1: dx is the same correlation run backwards, dP[m] = Σ_t w_t·dY[m − off_t],
// i.e. a correlation of dY (zero-extended by the largest offset) with mirrored offsets, so it
// reuses the forward loop. Other strides scatter dy·w through each tap instead. dW[t] is a dot
// product of dY with the padded input at each tap's offset. The flat loops are register-blocked
// on Eigen's SIMD packets (ploadu/pmadd), which keeps accumulators out of memory.
//
// Stored values (float32, float64, bfloat16) enter and leave only through the plane copies, which
// convert bfloat16 to and from float32 on the way, and the weights, converted once: every buffer
// and sum is compute_t<S>, and dW is rounded to bfloat16 once, when a channel's sum is complete.

#include <vector>

#include "tessera/core/parallel.h"
#include "tessera/ops/cpu/conv_common.h"
#include "tessera/ops/cpu/unary_spans.h"

namespace tessera::cpu::conv {

namespace {

constexpr int64_t kLanes = 16;  // flat runs are rounded up to a multiple of this many elements
int64_t round_up(int64_t n) { return (n + kLanes - 1) / kLanes * kLanes; }

template <class T>
using Buffer = Eigen::Array<T, Eigen::Dynamic, 1>;  // SIMD-aligned heap array

struct DepthwisePlan {
  int64_t hp, wp;                   // padded input plane
  int64_t pitch;                    // work buffer row pitch
  int64_t runs, run;                // the output positions as `runs` runs of `run` consecutive work elements
  int64_t src_stride;               // padded-plane step between consecutive elements of a run
  std::vector<int64_t> tap_offset;  // per tap (i, j), in the padded plane; ascending
  bool flat() const { return runs == 1; }
  int64_t padded_size() const { return hp * wp + kLanes; }  // slack for the rounded runs
  int64_t work_size(const Geometry& g) const { return g.oh * pitch + kLanes; }
};

DepthwisePlan depthwise_plan(const Geometry& g) {
  DepthwisePlan d;
  d.hp = g.h + 2 * g.p.padding[0];
  d.wp = g.w + 2 * g.p.padding[1];
  const bool flat = g.p.stride[0] == 1 && g.p.stride[1] == 1;
  d.pitch = flat ? d.wp : g.ow;
  d.runs = flat ? 1 : g.oh;
  d.run = flat ? round_up((g.oh - 1) * d.wp + g.ow) : g.ow;
  d.src_stride = g.p.stride[1];
  for (int64_t i = 0; i < g.kh; ++i)
    for (int64_t j = 0; j < g.kw; ++j) d.tap_offset.push_back(i * g.p.dilation[0] * d.wp + j * g.p.dilation[1]);
  return d;
}

// Padded-plane index of the first element of run r (its work index is r·pitch).
int64_t run_src(const DepthwisePlan& d, const Geometry& g, int64_t r) {
  return d.flat() ? 0 : r * g.p.stride[0] * d.wp;
}

// y[i·incy] += a·x[i·incx] for i < n (BLAS axpy; vectorised by Eigen when both are unit-stride).
template <class T>
void axpy(int64_t n, T a, const T* x, int64_t incx, T* y, int64_t incy) {
  if (incx == 1 && incy == 1) {
    Vec<T>(y, n) += a * CVec<T>(x, n);
    return;
  }
  for (int64_t i = 0; i < n; ++i) y[i * incy] += a * x[i * incx];
}

// Σ x[i]·y[i·incy] for i < n.
template <class T>
T dot(int64_t n, const T* x, const T* y, int64_t incy) {
  if (incy == 1) return (CVec<T>(x, n) * CVec<T>(y, n)).sum();
  T s = T(0);
  for (int64_t i = 0; i < n; ++i) s += x[i] * y[i * incy];
  return s;
}

// out[i] += Σ_t w[t]·src[offset[t] + i] for i < n, n a multiple of kLanes. Register-blocked:
// four SIMD accumulators stay in registers across all taps, so each multiply-add costs one load.
template <class T>
void correlate_flat(int64_t n, int64_t taps, const T* w, const int64_t* offset, const T* src, T* out) {
  namespace ei = Eigen::internal;
  using Packet = typename ei::packet_traits<T>::type;
  constexpr int64_t V = ei::packet_traits<T>::size;
  static_assert(kLanes % V == 0, "flat runs must be whole packets");
  int64_t i = 0;
  for (; i + 4 * V <= n; i += 4 * V) {
    Packet a0 = ei::ploadu<Packet>(out + i), a1 = ei::ploadu<Packet>(out + i + V);
    Packet a2 = ei::ploadu<Packet>(out + i + 2 * V), a3 = ei::ploadu<Packet>(out + i + 3 * V);
    for (int64_t t = 0; t < taps; ++t) {
      const Packet wt = ei::pset1<Packet>(w[t]);
      const T* s = src + offset[t] + i;
      a0 = ei::pmadd(wt, ei::ploadu<Packet>(s), a0);
      a1 = ei::pmadd(wt, ei::ploadu<Packet>(s + V), a1);
      a2 = ei::pmadd(wt, ei::ploadu<Packet>(s + 2 * V), a2);
      a3 = ei::pmadd(wt, ei::ploadu<Packet>(s + 3 * V), a3);
    }
    ei::pstoreu(out + i, a0);
    ei::pstoreu(out + i + V, a1);
    ei::pstoreu(out + i + 2 * V, a2);
    ei::pstoreu(out + i + 3 * V, a3);
  }
  for (; i < n; i += V) {
    Packet a = ei::ploadu<Packet>(out + i);
    for (int64_t t = 0; t < taps; ++t)
      a = ei::pmadd(ei::pset1<Packet>(w[t]), ei::ploadu<Packet>(src + offset[t] + i), a);
    ei::pstoreu(out + i, a);
  }
}

// sums[t] += Σ_i x[i]·src[offset[t] + i] for every tap t, i < n (n a multiple of kLanes): the dot
// products of x with each tap's shifted window. Four taps share each load of x, and their four
// SIMD accumulators are independent chains.
template <class T>
void dot_taps_flat(int64_t n, int64_t taps, const int64_t* offset, const T* x, const T* src, T* sums) {
  namespace ei = Eigen::internal;
  using Packet = typename ei::packet_traits<T>::type;
  constexpr int64_t V = ei::packet_traits<T>::size;
  int64_t t = 0;
  for (; t + 4 <= taps; t += 4) {
    const T *s0 = src + offset[t], *s1 = src + offset[t + 1], *s2 = src + offset[t + 2], *s3 = src + offset[t + 3];
    Packet a0 = ei::pset1<Packet>(T(0)), a1 = a0, a2 = a0, a3 = a0;
    for (int64_t i = 0; i < n; i += V) {
      const Packet xi = ei::ploadu<Packet>(x + i);
      a0 = ei::pmadd(xi, ei::ploadu<Packet>(s0 + i), a0);
      a1 = ei::pmadd(xi, ei::ploadu<Packet>(s1 + i), a1);
      a2 = ei::pmadd(xi, ei::ploadu<Packet>(s2 + i), a2);
      a3 = ei::pmadd(xi, ei::ploadu<Packet>(s3 + i), a3);
    }
    sums[t] += ei::predux(a0);
    sums[t + 1] += ei::predux(a1);
    sums[t + 2] += ei::predux(a2);
    sums[t + 3] += ei::predux(a3);
  }
  for (; t < taps; ++t) sums[t] += dot(n, x, src + offset[t], int64_t{1});
}

// out[run elements] += Σ_t w[t]·src[offset[t] + element·src_stride], over the plan's runs.
template <class T>
void correlate(const DepthwisePlan& d, const Geometry& g, const T* w, const int64_t* offset, const T* src, T* out) {
  if (d.flat()) {
    correlate_flat(d.run, g.taps(), w, offset, src, out);
    return;
  }
  for (int64_t t = 0; t < g.taps(); ++t)
    for (int64_t r = 0; r < d.runs; ++r)
      axpy(d.run, w[t], src + offset[t] + run_src(d, g, r), d.src_stride, out + r * d.pitch, int64_t{1});
}

// The first element of plane (n, c) of an operand laid out as `s`.
template <class T>
T* plane_of(T* base, Strides4 s, int64_t n, int64_t c) {
  return base + s(n, c, 0, 0);
}

// Copies an [rows, cols] plane (rows and columns s.s[2] and s.s[3] apart: a channels-last token map
// has its columns C apart) to/from a buffer of compute values with row pitch `pitch` starting at
// `at`; the other buffer elements are untouched (their zeros persist across planes).
template <class S>
void plane_to_buffer(const S* plane, Strides4 s, int64_t rows, int64_t cols, compute_t<S>* buffer, int64_t at,
                     int64_t pitch) {
  for (int64_t r = 0; r < rows; ++r) {
    const S* src = plane + r * s.s[2];
    compute_t<S>* dst = buffer + at + r * pitch;
    if (s.s[3] == 1) load_row(src, cols, dst);
    else
      for (int64_t q = 0; q < cols; ++q) dst[q] = value(src[q * s.s[3]]);
  }
}
template <class S>
void buffer_to_plane(const compute_t<S>* buffer, int64_t at, int64_t pitch, int64_t rows, int64_t cols, S* plane,
                     Strides4 s) {
  for (int64_t r = 0; r < rows; ++r) {
    const compute_t<S>* src = buffer + at + r * pitch;
    S* dst = plane + r * s.s[2];
    if (s.s[3] == 1) store_row(src, cols, dst);
    else
      for (int64_t q = 0; q < cols; ++q) dst[q * s.s[3]] = stored<S>(src[q]);
  }
}

}  // namespace

template <class S>
void depthwise_forward(const Geometry& g, const S* x, Strides4 sx, const S* w, const compute_t<S>* bias, S* y,
                       Strides4 sy, DepthwiseEpilogue epilogue, const S* upstream, Strides4 su) {
  using T = compute_t<S>;
  const bool gradient = epilogue == DepthwiseEpilogue::GeluGradient;
  if (gradient ? channels_last_depthwise(g, {sx, sy, su}) : channels_last_depthwise(g, {sx, sy})) {
    depthwise_forward_channels_last(g, x, sx, w, bias, y, sy, epilogue, upstream, su);
    return;
  }
  const DepthwisePlan d = depthwise_plan(g);
  const int64_t mult = g.o / g.c, L = g.out_plane(), interior = g.p.padding[0] * d.wp + g.p.padding[1];
  const int64_t grain = std::max<int64_t>(1, 4096 / std::max<int64_t>(L * g.taps(), 1));
  const UnaryArgs gelu{UnaryOp::GeluErf};
  RunIn<S> weights;
  const T* wt = weights(w, g.o * g.taps());  // the weights as compute values (bfloat16: converted once)
  parallel_for(0, g.n * g.o, grain, [&](int64_t p0, int64_t p1) {
    Buffer<T> padded = Buffer<T>::Zero(d.padded_size()), work(d.work_size(g));
    Buffer<T> upstream_plane(gradient ? d.work_size(g) : 0);  // g's plane at the work buffer's pitch
    int64_t loaded = -1;  // the input plane in `padded` (shared by a channel's multiplier outputs)
    for (int64_t plane = p0; plane < p1; ++plane) {
      const int64_t n = plane / g.o, o = plane % g.o, c = o / mult, in = n * g.c + c;
      if (in != loaded) plane_to_buffer(plane_of(x, sx, n, c), sx, g.h, g.w, padded.data(), interior, d.wp);
      loaded = in;
      work.setConstant(bias ? bias[o] : T(0));
      correlate(d, g, wt + o * g.taps(), d.tap_offset.data(), padded.data(), work.data());
      if (gradient) plane_to_buffer(plane_of(upstream, su, n, o), su, g.oh, g.ow, upstream_plane.data(), 0, d.pitch);
      if (epilogue != DepthwiseEpilogue::None)
        for (int64_t r = 0; r < g.oh; ++r) {  // in place, row by row (the pitch's extra columns are scratch)
          T* h = work.data() + r * d.pitch;
          if (gradient) unary_backward_span<T>(gelu, h, h, upstream_plane.data() + r * d.pitch, h, g.ow);
          else unary_span<T>(gelu, h, h, g.ow);
        }
      buffer_to_plane(work.data(), 0, d.pitch, g.oh, g.ow, plane_of(y, sy, n, o), sy);
    }
  });
}

// One pass per input channel c: its output channels o (c·mult ... ) are owned by the same thread,
// so dx[n, c] and dW[o] are both written race-free, and each dy and x plane is read once.
template <class S>
void depthwise_backward(const Geometry& g, const S* x, Strides4 sx, const S* w, const S* gy, Strides4 sgy, S* gx,
                        Strides4 sgx, S* gw) {
  using T = compute_t<S>;
  const bool unit_stride = g.p.stride[0] == 1 && g.p.stride[1] == 1;
  if ((!gx || unit_stride) && channels_last_depthwise(g, {sgy, gx ? sgx : sgy, gw ? sx : sgy})) {
    depthwise_backward_channels_last(g, x, sx, w, gy, sgy, gx, sgx, gw);
    return;
  }
  const DepthwisePlan d = depthwise_plan(g);
  const int64_t mult = g.o / g.c, L = g.out_plane(), interior = g.p.padding[0] * d.wp + g.p.padding[1];
  // Stride 1: dY goes into a zero-extended buffer at pitch Wp, `extend` elements in. From there
  // it is both the work-layout operand of the dW dot products and the source of the dx
  // correlation (mirrored offsets, computed over the flat range of the input positions only).
  const int64_t extend = d.tap_offset.back();
  std::vector<int64_t> mirrored;
  for (int64_t off : d.tap_offset) mirrored.push_back(extend - off);
  DepthwisePlan gather = d;
  gather.run = round_up((g.h - 1) * d.wp + g.w);
  const int64_t grain = std::max<int64_t>(1, 4096 / std::max<int64_t>(g.n * L * g.taps() * mult, 1));
  RunIn<S> weights;
  const T* wt = w ? weights(w, g.o * g.taps()) : nullptr;  // as compute values (bfloat16: converted once)
  parallel_for(0, g.c, grain, [&](int64_t c0, int64_t c1) {
    Buffer<T> padded = Buffer<T>::Zero(d.padded_size()), dpad(d.padded_size());
    Buffer<T> dy_ext = Buffer<T>::Zero(d.flat() ? extend + d.padded_size() : 0);
    Buffer<T> dy_plane(d.flat() ? 0 : L);
    RunOut<S> gw_out;  // a channel's dW, summed over the batch in compute_t<S> and stored once
    for (int64_t c = c0; c < c1; ++c) {
      T* gw_c = gw ? gw_out(gw + c * mult * g.taps(), mult * g.taps()) : nullptr;
      if (gw) std::fill(gw_c, gw_c + mult * g.taps(), T(0));
      for (int64_t n = 0; n < g.n; ++n) {
        if (gw) plane_to_buffer(plane_of(x, sx, n, c), sx, g.h, g.w, padded.data(), interior, d.wp);
        if (gx) dpad.setZero();
        for (int64_t o = c * mult; o < (c + 1) * mult; ++o) {
          const T* w_o = wt ? wt + o * g.taps() : nullptr;
          T* gw_o = gw ? gw_c + (o - c * mult) * g.taps() : nullptr;
          const S* dy = plane_of(gy, sgy, n, o);
          if (d.flat()) {
            plane_to_buffer(dy, sgy, g.oh, g.ow, dy_ext.data(), extend, d.wp);
            if (gx) correlate(gather, g, w_o, mirrored.data(), dy_ext.data() + interior, dpad.data() + interior);
            if (gw) dot_taps_flat(d.run, g.taps(), d.tap_offset.data(), dy_ext.data() + extend, padded.data(), gw_o);
            continue;
          }
          // Other strides: scatter dy·w through each tap, and per-row dot products, over the dy plane
          // where it is dense compute values, else over a dense copy of it.
          const T* dy_dense = nullptr;
          if constexpr (!kConverted<S>)
            if (sgy.s[3] == 1 && (sgy.s[2] == g.ow || g.oh <= 1)) dy_dense = dy;
          if (!dy_dense) {
            plane_to_buffer(dy, sgy, g.oh, g.ow, dy_plane.data(), 0, g.ow);
            dy_dense = dy_plane.data();
          }
          for (int64_t t = 0; t < g.taps(); ++t)
            for (int64_t r = 0; r < g.oh; ++r) {
              const int64_t at = d.tap_offset[t] + run_src(d, g, r);
              const T* dy_row = dy_dense + r * g.ow;
              if (gx) axpy(g.ow, w_o[t], dy_row, int64_t{1}, dpad.data() + at, d.src_stride);
              if (gw) gw_o[t] += dot(g.ow, dy_row, padded.data() + at, d.src_stride);
            }
        }
        if (gx) buffer_to_plane(dpad.data(), interior, d.wp, g.h, g.w, plane_of(gx, sgx, n, c), sgx);
      }
      if (gw) gw_out.done();
    }
  });
}

template void depthwise_forward<float>(const Geometry&, const float*, Strides4, const float*, const float*, float*,
                                       Strides4, DepthwiseEpilogue, const float*, Strides4);
template void depthwise_forward<double>(const Geometry&, const double*, Strides4, const double*, const double*, double*,
                                        Strides4, DepthwiseEpilogue, const double*, Strides4);
template void depthwise_forward<BFloat16>(const Geometry&, const BFloat16*, Strides4, const BFloat16*, const float*,
                                          BFloat16*, Strides4, DepthwiseEpilogue, const BFloat16*, Strides4);
template void depthwise_backward<float>(const Geometry&, const float*, Strides4, const float*, const float*, Strides4,
                                        float*, Strides4, float*);
template void depthwise_backward<double>(const Geometry&, const double*, Strides4, const double*, const double*,
                                         Strides4, double*, Strides4, double*);
template void depthwise_backward<BFloat16>(const Geometry&, const BFloat16*, Strides4, const BFloat16*, const BFloat16*,
                                           Strides4, BFloat16*, Strides4, BFloat16*);

}  // namespace tessera::cpu::conv
