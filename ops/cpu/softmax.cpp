// CPU softmax / log_softmax, forward and backward, max-subtracted:
//   softmax(x)_k = exp(x_k − m) / Σ_j exp(x_j − m),   log_softmax(x)_k = x_k − m − log Σ_j exp(x_j − m)
// with m = max_j x_j, so no exponent overflows. The tensor is viewed as [outer, n, inner] (n the
// softmax dim). When inner == 1 every row is contiguous and is done with Eigen's vectorised
// max/exp/sum; otherwise the kernel vectorises across `inner` (a chunk of adjacent columns at a
// time), carrying per-column running statistics while it walks the n rows of stride `inner`
// (several rows at once when inner is narrow). bfloat16 rows and column blocks are converted to
// float32 one at a time (ops/cpu/storage.h) and computed as float32 ones are.
#include <algorithm>
#include <cmath>

#include <Eigen/Core>

#include "tessera/core/parallel.h"
#include "tessera/ops/cpu/kernels.h"
#include "tessera/ops/cpu/storage.h"
#include "tessera/ops/kernels/softmax.h"

namespace tessera {

namespace {

template <class T>
using Vec = Eigen::Array<T, Eigen::Dynamic, 1>;
template <class T>
using Col = Eigen::Map<Vec<T>>;
template <class T>
using CCol = Eigen::Map<const Vec<T>>;

constexpr int64_t kLanes = 256;  // columns processed together when the softmax dim is not last

// ---- one contiguous row (softmax dim last) -------------------------------------------------------

template <class T>
void forward_row(SoftmaxKind kind, const T* xp, T* yp, int64_t n) {
  CCol<T> x(xp, n);
  Col<T> y(yp, n);
  const T m = x.maxCoeff();
  if (kind == SoftmaxKind::Softmax) {
    y = (x - m).exp();
    y *= T(1) / y.sum();
  } else {
    y = (x - m) - std::log((x - m).exp().sum());  // not x − (m + log Σ): m's rounding would leak in
  }
}

template <class T>
void backward_row(SoftmaxKind kind, const T* yp, const T* gp, T* op, int64_t n) {
  CCol<T> y(yp, n), g(gp, n);
  Col<T> gx(op, n);
  if (kind == SoftmaxKind::Softmax) gx = y * (g - (g * y).sum());
  else gx = g - y.exp() * g.sum();
}

// ---- w adjacent columns of an [n, inner] block (softmax dim not last) ----------------------------
// Row k of the block starts at base + k·stride. Rows are processed r at a time: when the block is
// full-width (stride == w) r consecutive rows form one contiguous segment of r·w values, so narrow
// blocks (inner = 8, say) still run on long vectors. Per-column statistics are then held as a
// "tile" of r copies (r·w values, matching a segment elementwise) and folded across the copies.

struct Segments {
  int64_t n, stride, w, r;
  int64_t count() const { return (n + r - 1) / r; }
  int64_t offset(int64_t g) const { return g * r * stride; }
  int64_t length(int64_t g) const { return std::min(r, n - g * r) * w; }
  int64_t tile() const { return r * w; }
};

Segments segments_of(int64_t n, int64_t stride, int64_t w) {
  const int64_t r = w == stride ? std::max<int64_t>(1, std::min(n, kLanes / w)) : 1;
  return {n, stride, w, r};
}

// Combines the r copies of each column's statistic (max or sum) and writes the result back to
// every copy.
template <bool kMax, class T>
void fold(T* tile, const Segments& s) {
  if (s.r == 1) return;
  Eigen::Map<Eigen::Array<T, Eigen::Dynamic, Eigen::Dynamic>> copies(tile, s.w, s.r);
  Vec<T> folded = kMax ? Vec<T>(copies.rowwise().maxCoeff()) : Vec<T>(copies.rowwise().sum());
  copies.colwise() = folded;
}

template <class T>
void forward_columns(SoftmaxKind kind, const T* xp, T* yp, int64_t n, int64_t stride, int64_t w, T* mp, T* sp) {
  const Segments sg = segments_of(n, stride, w);
  Col<T> m(mp, sg.tile()), s(sp, sg.tile());
  m = CCol<T>(xp, sg.tile());  // the first segment is full (r <= n)
  for (int64_t g = 1; g < sg.count(); ++g) {
    const int64_t len = sg.length(g);
    m.head(len) = m.head(len).max(CCol<T>(xp + sg.offset(g), len));
  }
  fold<true>(mp, sg);
  s.setZero();
  for (int64_t g = 0; g < sg.count(); ++g) {
    const int64_t len = sg.length(g);
    CCol<T> x(xp + sg.offset(g), len);
    if (kind == SoftmaxKind::Softmax) {
      Col<T> y(yp + sg.offset(g), len);
      y = (x - m.head(len)).exp();
      s.head(len) += y;
    } else {
      s.head(len) += (x - m.head(len)).exp();
    }
  }
  fold<false>(sp, sg);
  if (kind == SoftmaxKind::Softmax) s = s.inverse();
  else s = s.log();
  for (int64_t g = 0; g < sg.count(); ++g) {
    const int64_t len = sg.length(g);
    Col<T> y(yp + sg.offset(g), len);
    if (kind == SoftmaxKind::Softmax) y *= s.head(len);
    else y = (CCol<T>(xp + sg.offset(g), len) - m.head(len)) - s.head(len);
  }
}

template <class T>
void backward_columns(SoftmaxKind kind, const T* yp, const T* gp, T* op, int64_t n, int64_t stride, int64_t w, T* sp) {
  const Segments sg = segments_of(n, stride, w);
  Col<T> s(sp, sg.tile());  // Σ gy·y (softmax) or Σ gy (log_softmax) per column
  s.setZero();
  for (int64_t g = 0; g < sg.count(); ++g) {
    const int64_t len = sg.length(g);
    CCol<T> gy(gp + sg.offset(g), len);
    if (kind == SoftmaxKind::Softmax) s.head(len) += gy * CCol<T>(yp + sg.offset(g), len);
    else s.head(len) += gy;
  }
  fold<false>(sp, sg);
  for (int64_t g = 0; g < sg.count(); ++g) {
    const int64_t len = sg.length(g);
    CCol<T> y(yp + sg.offset(g), len), gy(gp + sg.offset(g), len);
    Col<T> gx(op + sg.offset(g), len);
    if (kind == SoftmaxKind::Softmax) gx = y * (gy - s.head(len));
    else gx = gy - y.exp() * s.head(len);
  }
}

// Runs row(offset, runs) for every contiguous row (inner == 1) or cols(offset, w, runs) for every
// chunk of at most kLanes columns (inner > 1), in parallel; offsets are in elements from the tensor
// start, and `runs` is one task's Runs (its readers and writers of stored values).
template <class Runs, class Row, class Cols>
void for_each_slice(const SoftmaxLayout& l, const Row& row, const Cols& cols) {
  if (l.inner == 1) {
    parallel_for(0, l.outer, std::max<int64_t>(1, 16384 / l.n), [&](int64_t b, int64_t e) {
      Runs runs;
      for (int64_t r = b; r < e; ++r) row(r * l.n, runs);
    });
    return;
  }
  const int64_t chunks = (l.inner + kLanes - 1) / kLanes;
  const int64_t work = l.n * std::min(l.inner, kLanes);
  parallel_for(0, l.outer * chunks, std::max<int64_t>(1, 16384 / work), [&](int64_t b, int64_t e) {
    Runs runs;
    for (int64_t t = b; t < e; ++t) {
      const int64_t o = t / chunks, j = (t % chunks) * kLanes;
      cols(o * l.n * l.inner + j, std::min(kLanes, l.inner - j), runs);
    }
  });
}

template <class S>
struct ForwardRuns {
  cpu::RunIn<S> x;
  cpu::RunOut<S> y;
};

template <class S>
struct BackwardRuns {
  cpu::RunIn<S> y, gy;
  cpu::RunOut<S> gx;
};

}  // namespace

namespace cpu {

void softmax(SoftmaxKind kind, const Tensor& x, int64_t dim, const Tensor& y) {
  const SoftmaxLayout l = softmax_layout(x, dim);
  TS_DISPATCH_STORED(x.dtype(), "softmax", [&] {
    using S = storage_t;
    using T = compute_t<S>;
    const S* xp = x.data<S>();
    S* yp = y.data<S>();
    for_each_slice<ForwardRuns<S>>(
        l,
        [&](int64_t off, ForwardRuns<S>& r) {
          forward_row<T>(kind, r.x(xp + off, l.n), r.y(yp + off, l.n), l.n);
          r.y.done();
        },
        [&](int64_t off, int64_t w, ForwardRuns<S>& r) {
          T buf[2 * kLanes];
          const int64_t stride = RunIn<S>::rows_stride(l.inner, w);
          forward_columns<T>(kind, r.x.matrix(xp + off, l.n, w, l.inner), r.y.matrix(yp + off, l.n, w, l.inner), l.n,
                             stride, w, buf, buf + kLanes);
          r.y.done();
        });
  });
}

void softmax_backward(SoftmaxKind kind, const Tensor& y, const Tensor& gy, int64_t dim, const Tensor& gx) {
  const SoftmaxLayout l = softmax_layout(y, dim);
  TS_DISPATCH_STORED(y.dtype(), "softmax_backward", [&] {
    using S = storage_t;
    using T = compute_t<S>;
    const S* yp = y.data<S>();
    const S* gp = gy.data<S>();
    S* op = gx.data<S>();
    for_each_slice<BackwardRuns<S>>(
        l,
        [&](int64_t off, BackwardRuns<S>& r) {
          backward_row<T>(kind, r.y(yp + off, l.n), r.gy(gp + off, l.n), r.gx(op + off, l.n), l.n);
          r.gx.done();
        },
        [&](int64_t off, int64_t w, BackwardRuns<S>& r) {
          T buf[kLanes];
          const int64_t stride = RunIn<S>::rows_stride(l.inner, w);
          backward_columns<T>(kind, r.y.matrix(yp + off, l.n, w, l.inner), r.gy.matrix(gp + off, l.n, w, l.inner),
                              r.gx.matrix(op + off, l.n, w, l.inner), l.n, stride, w, buf);
          r.gx.done();
        });
  });
}

}  // namespace cpu

}  // namespace tessera
