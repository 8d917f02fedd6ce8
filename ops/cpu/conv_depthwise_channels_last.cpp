// Depthwise convolution of channels-last maps on the CPU: x, y (and the upstream gradient of
// depthwise_conv2d_gelu's backward) with their channels adjacent in memory, one output channel per
// input channel. XCiT's LPI and CoaT's position encodings convolve token maps [B, H·W, C] seen as
// [B, C, H, W]; the plane kernel (conv_depthwise.cpp) gathers each channel's plane C elements
// apart, element by element, which made these convolutions run at ~6 GMAC/s on two cores. Here
// each output pixel is a vector of channels: SIMD lanes run along the channels, every tap is a
// multiply-add of a weight vector and an input pixel's channel vector, and the accumulators stay in
// registers across all taps of the pixel.
//
// Stride-1 input gradients are the same correlation of dy with the taps mirrored and the padding
// complemented (dx[i] = Σ_t w_t·dy[i + p − t·dil]), so they reuse the forward loop. Weight
// gradients are sums over all output pixels of dy ⊗ x at each tap; the pixels are cut into blocks
// of a fixed size (not by the thread count) whose partial sums are added in block order, so the
// result does not depend on how many threads ran.
//
// bfloat16 maps are read a whole input row (all its pixels' channels) at a time, converted to
// float32 into a few cached rows that consecutive output rows share, and the same float32 code
// runs on those; its output rows are rounded once as they are stored, its weight sums at the end.
#include <algorithm>
#include <vector>

#include "tessera/core/parallel.h"
#include "tessera/ops/cpu/conv_common.h"
#include "tessera/ops/cpu/unary_spans.h"

namespace tessera::cpu::conv {

namespace {

namespace ei = Eigen::internal;

// The taps' weights channel-innermost: [kh·kw, C] from [C, 1, kh, kw], mirrored when `mirror`
// (tap t read as tap taps−1−t).
template <class S>
std::vector<compute_t<S>> taps_by_channel(const S* w, int64_t channels, int64_t taps, bool mirror) {
  std::vector<compute_t<S>> out(static_cast<size_t>(taps * channels));
  for (int64_t c = 0; c < channels; ++c)
    for (int64_t t = 0; t < taps; ++t) out[(mirror ? taps - 1 - t : t) * channels + c] = value(w[c * taps + t]);
  return out;
}

// The input rows that output rows read (row ih of image n: its W pixels, channels adjacent) as
// compute values, their pixels pixel_stride() apart: in place where S is its own compute type,
// else converted into cached rows. The cache holds (kh − 1)·dil + 1 rows (at most H), row ih in
// slot ih mod that: the taps of one output row never share a slot, and consecutive output rows find
// the rows they share still converted.
template <class S>
class InputRows {
 public:
  using T = compute_t<S>;
  InputRows(const Geometry& g, const S* x, Strides4 sx) : g_(g), x_(x), sx_(sx) {
    if constexpr (kConverted<S>) {
      slots_ = std::min<int64_t>((g.kh - 1) * g.p.dilation[0] + 1, std::max<int64_t>(g.h, 1));
      tags_.assign(static_cast<size_t>(slots_), -1);
      rows_.resize(static_cast<size_t>(slots_ * g.w * g.c));
    }
  }
  int64_t pixel_stride() const { return kConverted<S> ? g_.c : sx_.s[3]; }
  // The rows output row r of image n reads at each vertical tap; null for taps in the padding.
  void rows_of(int64_t n, int64_t r, const T** rows) {
    for (int64_t i = 0; i < g_.kh; ++i) {
      const int64_t ih = r * g_.p.stride[0] - g_.p.padding[0] + i * g_.p.dilation[0];
      rows[i] = ih < 0 || ih >= g_.h ? nullptr : row(n, ih);
    }
  }

 private:
  const T* row(int64_t n, int64_t ih) {
    const S* src = x_ + n * sx_.s[0] + ih * sx_.s[2];
    if constexpr (!kConverted<S>) {
      return src;
    } else {
      const int64_t slot = ih % slots_, tag = n * g_.h + ih, C = g_.c;
      T* dst = rows_.data() + slot * g_.w * C;
      if (tags_[static_cast<size_t>(slot)] != tag) {
        load_rows(src, sx_.s[3], dst, C, g_.w, C);
        tags_[static_cast<size_t>(slot)] = tag;
      }
      return dst;
    }
  }

  const Geometry& g_;
  const S* x_;
  Strides4 sx_;
  int64_t slots_ = 0;
  std::vector<int64_t> tags_;  // the (n·H + ih) each slot holds, −1 for none
  std::vector<T> rows_;
};

// `pixels` pixels of C channels, `stride` apart, as compute values RunIn<S>::rows_stride(stride, C)
// apart (one conversion where they are adjacent).
template <class S>
const compute_t<S>* pixels_in(RunIn<S>& in, const S* src, int64_t pixels, int64_t C, int64_t stride) {
  if (kConverted<S> && (stride == C || pixels == 1)) return in(src, pixels * C);
  return in.matrix(src, pixels, C, stride);
}

// `pixels` pixels of C compute values (adjacent) to/from stored pixels `stride` apart.
template <class S>
void load_pixels(const S* src, int64_t pixels, int64_t C, int64_t stride, compute_t<S>* dst) {
  if (kConverted<S> && stride == C) return load_run(src, dst, pixels * C);
  for (int64_t q = 0; q < pixels; ++q) load_row(src + q * stride, C, dst + q * C);
}
template <class S>
void store_pixels(const compute_t<S>* src, int64_t pixels, int64_t C, S* dst, int64_t stride) {
  if (kConverted<S> && stride == C) return store_run(src, dst, pixels * C);
  for (int64_t q = 0; q < pixels; ++q) store_row(src + q * C, C, dst + q * stride);
}

// The output columns q whose input column q·stride − pad + j·dil lies in [0, size): [lo, hi).
struct Span {
  int64_t lo, hi;
};
Span valid_outputs(int64_t out, int64_t size, int64_t stride, int64_t pad, int64_t offset) {
  // q·stride ≥ pad − offset and q·stride ≤ size − 1 + pad − offset.
  const int64_t first = pad - offset, last = size - 1 + pad - offset;
  const int64_t lo = first <= 0 ? 0 : (first + stride - 1) / stride;
  const int64_t hi = last < 0 ? 0 : last / stride + 1;
  return {std::min(lo, out), std::min(hi, out)};
}

// K packets of channels from c0 at P output pixels q0, q0 + 1, ... of an output row, whose input
// rows at the vertical taps are x_rows (InputRows, pixels xs apart; null in the padding):
// out[q·C + c] = bias[c] + Σ_taps w[t, c]·x[n, row, col, c], the P·K accumulators in registers
// across all taps (independent chains, so the multiply-adds do not wait on each other's latency).
// Unchecked, every tap of the P pixels must lie inside the row horizontally; checked (P = 1), the
// taps outside are skipped.
template <class T, class Packet, int K, int P, bool Checked>
inline void pixel_block(const Geometry& g, const T* const* x_rows, int64_t xs, const T* wt, const T* bias, int64_t q0,
                        int64_t c0, T* out) {
  static_assert(!Checked || P == 1, "checked blocks are single pixels");
  constexpr int64_t V = ei::unpacket_traits<Packet>::size;
  const int64_t C = g.c;
  Packet acc[P][K];
  for (int k = 0; k < K; ++k) {
    const Packet b = bias ? ei::ploadu<Packet>(bias + c0 + k * V) : ei::pset1<Packet>(T(0));
    for (int p = 0; p < P; ++p) acc[p][k] = b;
  }
  for (int64_t i = 0; i < g.kh; ++i) {
    if (!x_rows[i]) continue;
    const T* x_row = x_rows[i] + c0;
    for (int64_t j = 0; j < g.kw; ++j) {
      const int64_t iw = q0 * g.p.stride[1] - g.p.padding[1] + j * g.p.dilation[1];
      if (Checked && (iw < 0 || iw >= g.w)) continue;
      const T* w_tap = wt + (i * g.kw + j) * C + c0;
      Packet w[K];
      for (int k = 0; k < K; ++k) w[k] = ei::ploadu<Packet>(w_tap + k * V);
      for (int p = 0; p < P; ++p) {
        const T* x_pixel = x_row + (iw + p * g.p.stride[1]) * xs;
        for (int k = 0; k < K; ++k) acc[p][k] = ei::pmadd(w[k], ei::ploadu<Packet>(x_pixel + k * V), acc[p][k]);
      }
    }
  }
  for (int p = 0; p < P; ++p)
    for (int k = 0; k < K; ++k) ei::pstoreu(out + (q0 + p) * C + c0 + k * V, acc[p][k]);
}

// The output columns whose taps all lie inside the input row: [lo, hi).
Span interior_columns(const Geometry& g) {
  const int64_t s = g.p.stride[1], pad = g.p.padding[1], reach = (g.kw - 1) * g.p.dilation[1];
  const int64_t lo = std::min(g.ow, pad <= 0 ? int64_t{0} : (pad + s - 1) / s);
  const int64_t last = g.w - 1 + pad - reach;  // q·s ≤ last
  const int64_t hi = last < 0 ? 0 : std::min(g.ow, last / s + 1);
  return {lo, std::max(lo, hi)};
}

// One channel group (K packets from c0) along a whole output row: the border columns checked,
// the interior P pixels at a time.
template <class T, class Packet, int K, int P>
void row_group(const Geometry& g, const T* const* x_rows, int64_t xs, const T* wt, const T* bias, Span inside,
               int64_t c0, T* out) {
  int64_t q = 0;
  for (; q < inside.lo; ++q) pixel_block<T, Packet, K, 1, true>(g, x_rows, xs, wt, bias, q, c0, out);
  for (; q + P <= inside.hi; q += P) pixel_block<T, Packet, K, P, false>(g, x_rows, xs, wt, bias, q, c0, out);
  for (; q < inside.hi; ++q) pixel_block<T, Packet, K, 1, false>(g, x_rows, xs, wt, bias, q, c0, out);
  for (; q < g.ow; ++q) pixel_block<T, Packet, K, 1, true>(g, x_rows, xs, wt, bias, q, c0, out);
}

// The channels [c0, C) past the last whole (half) packet, one at a time.
template <class T>
void row_channels_scalar(const Geometry& g, const T* const* x_rows, int64_t xs, const T* wt, const T* bias, int64_t c0,
                         T* out) {
  const int64_t C = g.c, kw = g.kw;
  for (int64_t q = 0; q < g.ow; ++q)
    for (int64_t c = c0; c < C; ++c) {
      T acc = bias ? bias[c] : T(0);
      for (int64_t i = 0; i < g.kh; ++i) {
        if (!x_rows[i]) continue;
        for (int64_t j = 0; j < kw; ++j) {
          const int64_t iw = q * g.p.stride[1] - g.p.padding[1] + j * g.p.dilation[1];
          if (iw >= 0 && iw < g.w) acc += wt[(i * kw + j) * C + c] * x_rows[i][iw * xs + c];
        }
      }
      out[q * C + c] = acc;
    }
}

// A whole output row [OW, C] into `out`, from the input rows x_rows (pixels xs apart): groups of
// four packets (two pixels at a time), the last one to three packets (more pixels at a time for
// fewer packets), a half packet where the ISA has one of half the width, then single channels.
template <class T>
void output_row(const Geometry& g, const T* const* x_rows, int64_t xs, const T* wt, const T* bias, T* out) {
  using Packet = typename ei::packet_traits<T>::type;
  using Half = typename ei::unpacket_traits<Packet>::half;
  constexpr int64_t V = ei::unpacket_traits<Packet>::size, VH = ei::unpacket_traits<Half>::size;
  const Span inside = interior_columns(g);
  int64_t c = 0;
  for (; c + 4 * V <= g.c; c += 4 * V) row_group<T, Packet, 4, 2>(g, x_rows, xs, wt, bias, inside, c, out);
  switch ((g.c - c) / V) {
    case 3: row_group<T, Packet, 3, 2>(g, x_rows, xs, wt, bias, inside, c, out); break;
    case 2: row_group<T, Packet, 2, 4>(g, x_rows, xs, wt, bias, inside, c, out); break;
    case 1: row_group<T, Packet, 1, 8>(g, x_rows, xs, wt, bias, inside, c, out); break;
    default: break;
  }
  c += (g.c - c) / V * V;
  if constexpr (VH * 2 == V) {
    if (c + VH <= g.c) {
      row_group<T, Half, 1, 8>(g, x_rows, xs, wt, bias, inside, c, out);
      c += VH;
    }
  }
  if (c < g.c) row_channels_scalar(g, x_rows, xs, wt, bias, c, out);
}

// The forward loop over output rows, with the taps `wt` laid out by taps_by_channel.
template <class S>
void correlate_rows(const Geometry& g, const S* x, Strides4 sx, const compute_t<S>* wt, const compute_t<S>* bias, S* y,
                    Strides4 sy, DepthwiseEpilogue epilogue, const S* upstream, Strides4 su) {
  using T = compute_t<S>;
  const int64_t C = g.c, row = g.ow * C;
  const int64_t grain = std::max<int64_t>(1, 16384 / std::max<int64_t>(row * g.taps(), 1));
  const UnaryArgs gelu{UnaryOp::GeluErf};
  parallel_for(0, g.n * g.oh, grain, [&](int64_t r0, int64_t r1) {
    Eigen::Array<T, Eigen::Dynamic, 1> work(row), up(epilogue == DepthwiseEpilogue::GeluGradient ? row : 0);
    InputRows<S> input(g, x, sx);
    std::vector<const T*> x_rows(static_cast<size_t>(g.kh));
    for (int64_t nr = r0; nr < r1; ++nr) {
      const int64_t n = nr / g.oh, r = nr % g.oh;
      input.rows_of(n, r, x_rows.data());
      output_row(g, x_rows.data(), input.pixel_stride(), wt, bias, work.data());
      if (epilogue == DepthwiseEpilogue::Gelu) unary_span<T>(gelu, work.data(), work.data(), row);
      if (epilogue == DepthwiseEpilogue::GeluGradient) {
        load_pixels(upstream + su(n, 0, r, 0), g.ow, C, su.s[3], up.data());
        unary_backward_span<T>(gelu, work.data(), work.data(), up.data(), work.data(), row);
      }
      store_pixels(work.data(), g.ow, C, y + sy(n, 0, r, 0), sy.s[3]);
    }
  });
}

}  // namespace

bool channels_last_depthwise(const Geometry& g, std::initializer_list<Strides4> operands) {
  if (g.o != g.c) return false;
  for (const Strides4& s : operands)
    if (s.s[1] != 1) return false;
  return true;
}

template <class S>
void depthwise_forward_channels_last(const Geometry& g, const S* x, Strides4 sx, const S* w, const compute_t<S>* bias,
                                     S* y, Strides4 sy, DepthwiseEpilogue epilogue, const S* upstream, Strides4 su) {
  const std::vector<compute_t<S>> wt = taps_by_channel(w, g.c, g.taps(), false);
  correlate_rows(g, x, sx, wt.data(), bias, y, sy, epilogue, upstream, su);
}

template <class S>
void depthwise_backward_channels_last(const Geometry& g, const S* x, Strides4 sx, const S* w, const S* gy, Strides4 sgy,
                                      S* gx, Strides4 sgx, S* gw) {
  using T = compute_t<S>;
  const int64_t C = g.c, taps = g.taps();
  if (gx) {
    // Stride 1: dx = dy ⋆ mirrored taps with padding dil·(k−1) − p, an [H, W] output.
    TS_CHECK(g.p.stride[0] == 1 && g.p.stride[1] == 1, "depthwise_backward_channels_last: stride 1 only");
    Geometry back = g;
    back.h = g.oh;
    back.w = g.ow;
    back.oh = g.h;
    back.ow = g.w;
    for (int a = 0; a < 2; ++a) back.p.padding[a] = g.p.dilation[a] * ((a == 0 ? g.kh : g.kw) - 1) - g.p.padding[a];
    const std::vector<T> mirrored = taps_by_channel(w, C, taps, true);
    correlate_rows<S>(back, gy, sgy, mirrored.data(), nullptr, gx, sgx, DepthwiseEpilogue::None, nullptr, {});
  }
  if (!gw) return;
  // dW[t, c] = Σ over output pixels of dy[pixel, c]·x[pixel's tap t input, c]: summed per output
  // row, the rows' sums per fixed block of rows, and the blocks' in block order (three short
  // chains of additions in compute_t<S> rather than one long one, rounded to S once).
  constexpr int64_t kRowsPerBlock = 8;
  const int64_t rows = g.n * g.oh, blocks = (rows + kRowsPerBlock - 1) / kRowsPerBlock;
  std::vector<T> partial(static_cast<size_t>(blocks * taps * C), T(0));
  parallel_for(0, blocks, 1, [&](int64_t b0, int64_t b1) {
    Eigen::Array<T, Eigen::Dynamic, 1> row_sums(taps * C);
    InputRows<S> input(g, x, sx);
    RunIn<S> dy_in;
    std::vector<const T*> x_rows(static_cast<size_t>(g.kh));
    const int64_t xs = input.pixel_stride(), ds = RunIn<S>::rows_stride(sgy.s[3], C);
    for (int64_t b = b0; b < b1; ++b) {
      Vec<T> block_sums(partial.data() + b * taps * C, taps * C);
      for (int64_t nr = b * kRowsPerBlock; nr < std::min(rows, (b + 1) * kRowsPerBlock); ++nr) {
        const int64_t n = nr / g.oh, r = nr % g.oh;
        T* sums = row_sums.data();
        row_sums.setZero();
        input.rows_of(n, r, x_rows.data());
        const T* dy = pixels_in(dy_in, gy + sgy(n, 0, r, 0), g.ow, C, sgy.s[3]);
        for (int64_t i = 0; i < g.kh; ++i) {
          if (!x_rows[i]) continue;
          for (int64_t j = 0; j < g.kw; ++j) {
            const Span cols = valid_outputs(g.ow, g.w, g.p.stride[1], g.p.padding[1], j * g.p.dilation[1]);
            Vec<T> s(sums + (i * g.kw + j) * C, C);
            for (int64_t q = cols.lo; q < cols.hi; ++q) {
              const int64_t iw = q * g.p.stride[1] - g.p.padding[1] + j * g.p.dilation[1];
              s += CVec<T>(dy + q * ds, C) * CVec<T>(x_rows[i] + iw * xs, C);
            }
          }
        }
        block_sums += row_sums;
      }
    }
  });
  for (int64_t c = 0; c < C; ++c)
    for (int64_t t = 0; t < taps; ++t) {
      T total = T(0);
      for (int64_t b = 0; b < blocks; ++b) total += partial[(b * taps + t) * C + c];
      gw[c * taps + t] = stored<S>(total);
    }
}

template void depthwise_forward_channels_last<float>(const Geometry&, const float*, Strides4, const float*,
                                                     const float*, float*, Strides4, DepthwiseEpilogue, const float*,
                                                     Strides4);
template void depthwise_forward_channels_last<double>(const Geometry&, const double*, Strides4, const double*,
                                                      const double*, double*, Strides4, DepthwiseEpilogue,
                                                      const double*, Strides4);
template void depthwise_forward_channels_last<BFloat16>(const Geometry&, const BFloat16*, Strides4, const BFloat16*,
                                                        const float*, BFloat16*, Strides4, DepthwiseEpilogue,
                                                        const BFloat16*, Strides4);
template void depthwise_backward_channels_last<float>(const Geometry&, const float*, Strides4, const float*,
                                                      const float*, Strides4, float*, Strides4, float*);
template void depthwise_backward_channels_last<double>(const Geometry&, const double*, Strides4, const double*,
                                                       const double*, Strides4, double*, Strides4, double*);
template void depthwise_backward_channels_last<BFloat16>(const Geometry&, const BFloat16*, Strides4, const BFloat16*,
                                                         const BFloat16*, Strides4, BFloat16*, Strides4, BFloat16*);

}  // namespace tessera::cpu::conv
