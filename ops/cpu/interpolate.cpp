// CPU bilinear/bicubic resize (formulas in ops/kernels/interpolate.h). The 2-D filter is
// separable, so each output row is computed as a vertical blend of whole input rows (a few
// vectorised Eigen axpys over W) followed by horizontal taps along that blended row. The forward
// runs in parallel over all N·C·oH output rows; the backward scatters the same weights in the
// reverse order and runs in parallel over the N·C planes, which own disjoint parts of gx.
// bfloat16 tensors compute in float32 (the taps' weights too, as on cuda): input rows are converted
// as the blends read them, output rows and gx planes rounded once as they are stored.
#include <algorithm>
#include <cmath>
#include <vector>

#include <Eigen/Core>

#include "tessera/core/parallel.h"
#include "tessera/ops/cpu/kernels.h"
#include "tessera/ops/cpu/rows.h"
#include "tessera/ops/cpu/storage.h"
#include "tessera/ops/kernels/interpolate.h"

namespace tessera {

namespace {

using cpu::compute_t;
using cpu::CRow;
using cpu::kConverted;
using cpu::Row;
using cpu::RunIn;
using cpu::RunOut;

// Tap positions and weights of every output pixel along one axis: pixel i reads index[i·taps + k]
// with weight weight[i·taps + k], k < taps.
template <class T>
struct AxisTaps {
  int taps = 0;
  std::vector<int64_t> index;
  std::vector<T> weight;
};

template <class T>
AxisTaps<T> axis_taps(InterpolationMode mode, int64_t in, int64_t out) {
  AxisTaps<T> a;
  a.taps = mode == InterpolationMode::Bilinear ? 2 : 4;
  a.index.resize(out * a.taps);
  a.weight.resize(out * a.taps);
  for (int64_t i = 0; i < out; ++i) {
    int64_t* idx = a.index.data() + i * a.taps;
    T* w = a.weight.data() + i * a.taps;
    const T src = interp_source_coord<T>(in, out, i);
    if (mode == InterpolationMode::Bilinear) {
      const T s = std::max(src, T(0));
      const int64_t i0 = static_cast<int64_t>(s);  // floor, s >= 0
      const T t = s - static_cast<T>(i0);
      idx[0] = i0;
      idx[1] = std::min(i0 + 1, in - 1);
      w[0] = T(1) - t;
      w[1] = t;
    } else {
      const T f = std::floor(src);
      T wk[4];
      cubic_weights<T>(src - f, wk);
      for (int k = 0; k < 4; ++k) {
        idx[k] = std::clamp<int64_t>(static_cast<int64_t>(f) - 1 + k, 0, in - 1);
        w[k] = wk[k];
      }
    }
  }
  return a;
}

// The rows of the input planes [H, W] as compute values: in place where S is its own compute type,
// else converted into cached rows, row i of a plane in slot i mod kSlots. An output row's taps are
// at most four consecutive rows, so they never share a slot, and the next output row finds the
// rows it shares with this one still converted.
template <class S>
class InputRows {
 public:
  using T = compute_t<S>;
  static constexpr int64_t kSlots = 4;
  InputRows(const S* x, int64_t H, int64_t W) : x_(x), H_(H), W_(W) {
    if constexpr (kConverted<S>) rows_.resize(static_cast<size_t>(kSlots * W));
  }
  const T* row(int64_t plane, int64_t i) {
    const S* src = x_ + (plane * H_ + i) * W_;
    if constexpr (!kConverted<S>) {
      return src;
    } else {
      const int64_t slot = i % kSlots, tag = plane * H_ + i;
      T* dst = rows_.data() + slot * W_;
      if (tags_[slot] != tag) {
        cpu::load_run(src, dst, W_);
        tags_[slot] = tag;
      }
      return dst;
    }
  }

 private:
  const S* x_;
  int64_t H_, W_;
  int64_t tags_[kSlots] = {-1, -1, -1, -1};  // the (plane·H + i) each slot holds
  std::vector<T> rows_;
};

template <class S>
void forward(InterpolationMode mode, const Tensor& x, const Tensor& y) {
  using T = compute_t<S>;
  const ResizeGeometry g = resize_geometry(x, y);
  const AxisTaps<T> ty = axis_taps<T>(mode, g.H, g.oH), tx = axis_taps<T>(mode, g.W, g.oW);
  const S* src = x.data<S>();
  S* dst = y.data<S>();
  const int64_t row_cost = ty.taps * g.W + tx.taps * g.oW;
  parallel_for(0, g.planes * g.oH, std::max<int64_t>(1, 32768 / row_cost), [&](int64_t r0, int64_t r1) {
    Eigen::Array<T, Eigen::Dynamic, 1> blend(g.W);
    InputRows<S> rows(src, g.H, g.W);
    RunOut<S> out_row;
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t plane = r / g.oH, oy = r % g.oH;
      blend.setZero();
      for (int a = 0; a < ty.taps; ++a)
        blend += ty.weight[oy * ty.taps + a] * CRow<T>(rows.row(plane, ty.index[oy * ty.taps + a]), g.W);
      T* out = out_row(dst + r * g.oW, g.oW);
      for (int64_t ox = 0; ox < g.oW; ++ox) {
        T acc = 0;
        for (int b = 0; b < tx.taps; ++b) acc += tx.weight[ox * tx.taps + b] * blend[tx.index[ox * tx.taps + b]];
        out[ox] = acc;
      }
      out_row.done();
    }
  });
}

template <class S>
void backward(InterpolationMode mode, const Tensor& gy, const Tensor& gx) {
  using T = compute_t<S>;
  const ResizeGeometry g = resize_geometry(gx, gy);
  const AxisTaps<T> ty = axis_taps<T>(mode, g.H, g.oH), tx = axis_taps<T>(mode, g.W, g.oW);
  const S* src = gy.data<S>();
  S* dst = gx.data<S>();
  const int64_t plane_cost = g.oH * (ty.taps * g.W + tx.taps * g.oW);
  parallel_for(0, g.planes, std::max<int64_t>(1, 32768 / plane_cost), [&](int64_t p0, int64_t p1) {
    Eigen::Array<T, Eigen::Dynamic, 1> blend(g.W);
    RunIn<S> gy_row;
    RunOut<S> gx_plane;  // bfloat16: the plane summed in float32, stored once
    for (int64_t p = p0; p < p1; ++p) {
      T* in = gx_plane(dst + p * g.H * g.W, g.H * g.W);
      Row<T>(in, g.H * g.W).setZero();
      for (int64_t oy = 0; oy < g.oH; ++oy) {
        const T* out = gy_row(src + (p * g.oH + oy) * g.oW, g.oW);
        blend.setZero();
        for (int64_t ox = 0; ox < g.oW; ++ox)
          for (int b = 0; b < tx.taps; ++b) blend[tx.index[ox * tx.taps + b]] += tx.weight[ox * tx.taps + b] * out[ox];
        for (int a = 0; a < ty.taps; ++a)
          Row<T>(in + ty.index[oy * ty.taps + a] * g.W, g.W) += ty.weight[oy * ty.taps + a] * blend;
      }
      gx_plane.done();
    }
  });
}

}  // namespace

namespace cpu {

void interpolate(InterpolationMode mode, const Tensor& x, const Tensor& y) {
  TS_DISPATCH_STORED(x.dtype(), "interpolate", [&] { forward<storage_t>(mode, x, y); });
}

void interpolate_backward(InterpolationMode mode, const Tensor& gy, const Tensor& gx) {
  TS_DISPATCH_STORED(gy.dtype(), "interpolate_backward", [&] { backward<storage_t>(mode, gy, gx); });
}

}  // namespace cpu

}  // namespace tessera
