// Kernel interface of the interpolation family (internal), and the sampling formulas every
// device's kernel must share so that all of them match F.interpolate(..., align_corners=False).
//
// Along one axis of input size `in` resized to `out`, output pixel dst samples the input at
//   src = scale · (dst + 0.5) − 0.5,  scale = in / out           (PyTorch's
//   area_pixel_compute_source_index), clamped at 0 for bilinear but not for bicubic.
// Bilinear: taps floor(src) and floor(src) + 1 (the latter clamped to in − 1), weights 1 − t, t.
// Bicubic: taps floor(src) − 1 … floor(src) + 2, each clamped to [0, in − 1], with Keys' cubic
// convolution weights (A = −0.75), t = src − floor(src):
//   W(x) = (A + 2)|x|³ − (A + 3)|x|² + 1        for |x| ≤ 1
//   W(x) = A|x|³ − 5A|x|² + 8A|x| − 4A           for 1 < |x| < 2
// and the 2-D result is the tensor product of the two axes' weights.
#pragma once
#include <cstdint>

#include "tessera/core/dispatch.h"
#include "tessera/core/tensor.h"

namespace tessera {

// The sampling of ops/interpolate.h's interpolate(), shared by its front end and every kernel.
enum class InterpolationMode { Bilinear, Bicubic };

// y = resize(x): x contiguous [N, C, H, W], y contiguous [N, C, oH, oW]; float32/float64.
using InterpolateKernel = void(InterpolationMode mode, const Tensor& x, const Tensor& y);
// The adjoint: gx (contiguous [N, C, H, W], fully overwritten) receives every gy element scattered
// with the forward weights; gy contiguous [N, C, oH, oW].
using InterpolateBackwardKernel = void(InterpolationMode mode, const Tensor& gy, const Tensor& gx);

// A resize as N·C planes of [H, W] to [oH, oW], from the input- and output-shaped tensors.
struct ResizeGeometry {
  int64_t planes, H, W, oH, oW;
};
inline ResizeGeometry resize_geometry(const Tensor& in, const Tensor& out) {
  return {in.shape()[0] * in.shape()[1], in.shape()[2], in.shape()[3], out.shape()[2], out.shape()[3]};
}

// Unclamped source coordinate of output pixel `dst` (computed in T, as PyTorch does in the
// input's precision).
template <class T>
constexpr T interp_source_coord(int64_t in, int64_t out, int64_t dst) {
  const T scale = static_cast<T>(in) / static_cast<T>(out);
  return scale * (static_cast<T>(dst) + T(0.5)) - T(0.5);
}

// Cubic convolution weights of the four taps floor(src) − 1 … floor(src) + 2, at t = src − floor(src).
template <class T>
constexpr void cubic_weights(T t, T (&w)[4]) {
  constexpr T A = T(-0.75);
  auto near = [](T x) { return ((A + 2) * x - (A + 3)) * x * x + 1; };       // |x| <= 1
  auto far = [](T x) { return ((A * x - 5 * A) * x + 8 * A) * x - 4 * A; };  // 1 < |x| < 2
  w[0] = far(t + 1);
  w[1] = near(t);
  w[2] = near(1 - t);
  w[3] = far(2 - t);
}

}  // namespace tessera
