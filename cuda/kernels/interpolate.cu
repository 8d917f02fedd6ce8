// CUDA kernels of bilinear/bicubic resizing (sampling formulas in ops/kernels/interpolate.h, shared
// with the CPU). The forward is one thread per output pixel, blending the input rows of its taps
// first and then the columns, as the CPU does. The backward is one thread per INPUT pixel, which
// gathers the output gradients whose taps reach it: no atomics, so the result is the same on every
// run. The taps of each axis are inverted on the host into small tables (for input index i, the
// output indices that read it and the summed weight), uploaded once per call. bfloat16 and float16
// compute in float32 (taps and weights included).
#include <algorithm>
#include <cmath>
#include <vector>

#include "tessera/cuda/device.h"
#include "tessera/cuda/device_math.h"
#include "tessera/cuda/dispatch.h"
#include "tessera/cuda/grid.h"
#include "tessera/cuda/kernels.h"
#include "tessera/ops/kernels/convert.h"
#include "tessera/ops/kernels/interpolate.h"

namespace tessera::cuda {

namespace {

// The taps of output index `o` along an axis of `in` values: (index, weight) pairs; returns how many.
template <class T>
__host__ __device__ int axis_taps(InterpolationMode mode, int64_t in, int64_t out, int64_t o, int64_t (&idx)[4],
                                  T (&w)[4]) {
  const T src = interp_source_coord<T>(in, out, o);
  if (mode == InterpolationMode::Bilinear) {
    const T s = src > T(0) ? src : T(0);
    const int64_t i0 = static_cast<int64_t>(s);  // floor, s >= 0
    const T t = s - static_cast<T>(i0);
    idx[0] = i0;
    idx[1] = i0 + 1 < in - 1 ? i0 + 1 : in - 1;
    w[0] = T(1) - t;
    w[1] = t;
    return 2;
  }
  const T f = static_cast<T>(::floor(static_cast<double>(src)));  // exact for float too
  cubic_weights<T>(src - f, w);
  for (int k = 0; k < 4; ++k) {
    const int64_t i = static_cast<int64_t>(f) - 1 + k;
    idx[k] = i < 0 ? 0 : (i > in - 1 ? in - 1 : i);
  }
  return 4;
}

template <class S, class A>
__global__ void interpolate_pixels(InterpolationMode mode, ResizeGeometry g, const S* x, S* y) {
  TS_GRID_STRIDE_LOOP(i, g.planes * g.oH * g.oW) {
    const int64_t ox = i % g.oW, oy = i / g.oW % g.oH, plane = i / (g.oW * g.oH);
    int64_t iy[4], ix[4];
    A wy[4], wx[4];
    const int ty = axis_taps<A>(mode, g.H, g.oH, oy, iy, wy), tx = axis_taps<A>(mode, g.W, g.oW, ox, ix, wx);
    const S* in = x + plane * g.H * g.W;
    A acc = 0;
    for (int b = 0; b < tx; ++b) {
      A blend = 0;  // the vertical blend of column ix[b], as the CPU's blended row holds it
      for (int a = 0; a < ty; ++a) blend += wy[a] * convert::convert<S, A>(in[iy[a] * g.W + ix[b]]);
      acc += wx[b] * blend;
    }
    y[i] = convert::convert<A, S>(acc);
  }
}

// For input index i of an axis: entries [start[i], start[i + 1]) of (output, weight).
struct InverseTaps {
  Tensor start, output, weight;  // int64, int64, the T of inverse_taps<T>; on the device
};

template <class T>
InverseTaps inverse_taps(InterpolationMode mode, int64_t in, int64_t out, Device device) {
  std::vector<std::vector<std::pair<int64_t, T>>> by_input(static_cast<size_t>(in));
  for (int64_t o = 0; o < out; ++o) {
    int64_t idx[4];
    T w[4];
    const int taps = axis_taps<T>(mode, in, out, o, idx, w);
    for (int k = 0; k < taps; ++k) {
      auto& list = by_input[static_cast<size_t>(idx[k])];
      if (!list.empty() && list.back().first == o) list.back().second += w[k];  // a clamped tap repeats
      else list.emplace_back(o, w[k]);
    }
  }
  std::vector<int64_t> start{0}, outputs;
  std::vector<T> weights;
  for (const auto& list : by_input) {
    for (const auto& [o, w] : list) {
      outputs.push_back(o);
      weights.push_back(w);
    }
    start.push_back(static_cast<int64_t>(outputs.size()));
  }
  const auto upload = [&](const auto& v, DType dtype) {
    return from_blob(v.data(), {static_cast<int64_t>(v.size())}, dtype).to(device);
  };
  return {upload(start, DType::Int64), upload(outputs, DType::Int64), upload(weights, DTypeOf<T>::value)};
}

template <class S, class A>
__global__ void interpolate_backward_pixels(ResizeGeometry g, const S* gy, const int64_t* ys, const int64_t* yo,
                                            const A* yw, const int64_t* xs, const int64_t* xo, const A* xw, S* gx) {
  TS_GRID_STRIDE_LOOP(i, g.planes * g.H * g.W) {
    const int64_t x = i % g.W, y = i / g.W % g.H, plane = i / (g.W * g.H);
    const S* out = gy + plane * g.oH * g.oW;
    A acc = 0;
    for (int64_t a = ys[y]; a < ys[y + 1]; ++a) {
      A row = 0;
      for (int64_t b = xs[x]; b < xs[x + 1]; ++b) row += xw[b] * convert::convert<S, A>(out[yo[a] * g.oW + xo[b]]);
      acc += yw[a] * row;
    }
    gx[i] = convert::convert<A, S>(acc);
  }
}

}  // namespace

void interpolate(InterpolationMode mode, const Tensor& x, const Tensor& y) {
  const ResizeGeometry g = resize_geometry(x, y);
  const int64_t n = y.numel();
  if (n == 0) return;
  KernelContext ctx(y);
  dispatch_floating(x.dtype(), "interpolate", [&]<class S, class A>() {
    launch("interpolate", interpolate_pixels<S, A>, blocks_for(n), kBlockThreads, 0, ctx.stream, mode, g,
           x.device_data<S>(), y.device_data<S>());
  });
}

void interpolate_backward(InterpolationMode mode, const Tensor& gy, const Tensor& gx) {
  const ResizeGeometry g = resize_geometry(gx, gy);
  const int64_t n = gx.numel();
  if (n == 0) return;
  KernelContext ctx(gx);
  dispatch_floating(gy.dtype(), "interpolate_backward", [&]<class S, class A>() {
    const InverseTaps ty = inverse_taps<A>(mode, g.H, g.oH, gx.device()),
                      tx = inverse_taps<A>(mode, g.W, g.oW, gx.device());
    launch("interpolate_backward", interpolate_backward_pixels<S, A>, blocks_for(n), kBlockThreads, 0, ctx.stream, g,
           gy.device_data<S>(), ty.start.device_data<int64_t>(), ty.output.device_data<int64_t>(),
           ty.weight.device_data<A>(), tx.start.device_data<int64_t>(), tx.output.device_data<int64_t>(),
           tx.weight.device_data<A>(), gx.device_data<S>());
  });
}

}  // namespace tessera::cuda
