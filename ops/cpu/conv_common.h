// Internal to the CPU convolution kernels (ops/cpu/conv*.cpp): the geometry of one convolution
// and the row helpers shared by the GEMM (im2col) path and the direct depthwise path. Each kernel is
// a template on the storage type S of the activations and the weight (float32, float64 or bfloat16,
// ops/cpu/storage.h); the bias, its gradient and the arithmetic are compute_t<S>.
#pragma once
#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <type_traits>

#if defined(__AVX512F__)
#include <immintrin.h>
#endif

#include <Eigen/Core>

#include "tessera/core/tensor.h"
#include "tessera/ops/cpu/storage.h"
#include "tessera/ops/kernels/conv.h"

namespace tessera::cpu::conv {

template <class T>
using Vec = Eigen::Map<Eigen::Array<T, Eigen::Dynamic, 1>>;
template <class T>
using CVec = Eigen::Map<const Eigen::Array<T, Eigen::Dynamic, 1>>;

// dst[0, n) = src[0, n). Rows here are short (often under one SIMD register): with AVX-512 the
// tail is one masked load/store, elsewhere Eigen's vector loop; either beats a memmove call.
// bfloat16 values are moved as they are (16-bit lanes).
template <class T>
void copy_row(const T* src, int64_t n, T* dst) {
#if defined(__AVX512F__)
  if constexpr (std::is_same_v<T, float>) {
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) _mm512_storeu_ps(dst + i, _mm512_loadu_ps(src + i));
    const __mmask16 m = static_cast<__mmask16>((1u << (n - i)) - 1);
    _mm512_mask_storeu_ps(dst + i, m, _mm512_maskz_loadu_ps(m, src + i));
    return;
  } else if constexpr (std::is_same_v<T, double>) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) _mm512_storeu_pd(dst + i, _mm512_loadu_pd(src + i));
    const __mmask8 m = static_cast<__mmask8>((1u << (n - i)) - 1);
    _mm512_mask_storeu_pd(dst + i, m, _mm512_maskz_loadu_pd(m, src + i));
    return;
  }
#endif
#if defined(__AVX512BW__)
  if constexpr (std::is_same_v<T, BFloat16>) {
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) _mm512_storeu_si512(dst + i, _mm512_loadu_si512(src + i));
    const __mmask32 m = static_cast<__mmask32>((uint64_t{1} << (n - i)) - 1);
    _mm512_mask_storeu_epi16(dst + i, m, _mm512_maskz_loadu_epi16(m, src + i));
    return;
  }
#endif
  if constexpr (std::is_floating_point_v<T>) Vec<T>(dst, n) = CVec<T>(src, n);
  else std::copy(src, src + n, dst);
}

// A row of n stored values read as compute values (copy_row where S is its own compute type,
// converted otherwise), and written back.
template <class S>
void load_row(const S* src, int64_t n, compute_t<S>* dst) {
  if constexpr (kConverted<S>) load_run(src, dst, n);
  else copy_row(src, n, dst);
}
template <class S>
void store_row(const compute_t<S>* src, int64_t n, S* dst) {
  if constexpr (kConverted<S>) store_run(src, dst, n);
  else copy_row(src, n, dst);
}

struct Geometry {
  int64_t n, c, h, w, o, kh, kw, oh, ow, groups, cg, og;
  Conv2dParams p;
  int64_t taps() const { return kh * kw; }
  int64_t rows() const { return cg * kh * kw; }  // GEMM depth: rows of cols
  int64_t out_plane() const { return oh * ow; }
  int64_t in_plane() const { return h * w; }
  bool depthwise() const { return cg == 1; }
  // The image is its own im2col matrix.
  bool pointwise() const {
    return kh == 1 && kw == 1 && p.stride[0] == 1 && p.stride[1] == 1 && p.padding[0] == 0 && p.padding[1] == 0;
  }
};

inline Geometry geometry(const Shape& xs, const Shape& ws, const Shape& ys, const Conv2dParams& p) {
  return {xs[0], xs[1], xs[2], xs[3], ys[1], ws[2], ws[3], ys[2], ys[3], p.groups, xs[1] / p.groups, ys[1] / p.groups,
          p};
}

// Dense and grouped convolution through im2col + GEMM (conv_dense.cpp). gx and gw may be null
// (not wanted); gw is overwritten with the sum over the batch. x, w, y and their gradients are
// stored as S, the bias as compute_t<S>.
template <class S>
void dense_forward(const Geometry& g, const S* x, const S* w, const compute_t<S>* bias, S* y);
template <class S>
void dense_backward(const Geometry& g, const S* x, const S* w, const S* gy, S* gx, S* gw);
// Depthwise convolution, Cg == 1 (conv_depthwise.cpp); same conventions, but x, y, gy and gx in
// any layout, as their strides say (ops/kernels/conv.h). The forward pass writes what `epilogue`
// says (depthwise_conv2d_gelu's kernels, ops/cpu/depthwise_conv2d_gelu.cpp); `upstream` (stored as
// S), laid out as `su`, is g for DepthwiseEpilogue::GeluGradient.
template <class S>
void depthwise_forward(const Geometry& g, const S* x, Strides4 sx, const S* w, const compute_t<S>* bias, S* y,
                       Strides4 sy, DepthwiseEpilogue epilogue = DepthwiseEpilogue::None, const S* upstream = nullptr,
                       Strides4 su = {});
template <class S>
void depthwise_backward(const Geometry& g, const S* x, Strides4 sx, const S* w, const S* gy, Strides4 sgy, S* gx,
                        Strides4 sgx, S* gw);
// The channels-last depthwise kernels (conv_depthwise_channels_last.cpp), which depthwise_forward
// and depthwise_backward hand their work to when channels_last_depthwise holds for the operands
// they read and write: one output channel per input channel and every operand's channels adjacent
// (stride 1). The backward takes an input gradient at stride 1 only.
bool channels_last_depthwise(const Geometry& g, std::initializer_list<Strides4> operands);
template <class S>
void depthwise_forward_channels_last(const Geometry& g, const S* x, Strides4 sx, const S* w, const compute_t<S>* bias,
                                     S* y, Strides4 sy, DepthwiseEpilogue epilogue, const S* upstream, Strides4 su);
template <class S>
void depthwise_backward_channels_last(const Geometry& g, const S* x, Strides4 sx, const S* w, const S* gy, Strides4 sgy,
                                      S* gx, Strides4 sgx, S* gw);

}  // namespace tessera::cpu::conv
