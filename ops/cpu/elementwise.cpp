// CPU kernels of the elementwise family. Unary and binary math runs on contiguous spans through
// Eigen array expressions, which vectorise exp/tanh/erf/log with SIMD polynomial approximations;
// bfloat16 operands compute in float32, a converted chunk at a time (ops/cpu/spans.h).
#include <cmath>

#include <Eigen/Core>
#include <unsupported/Eigen/SpecialFunctions>

#include "tessera/ops/cpu/kernels.h"
#include "tessera/ops/cpu/spans.h"
#include "tessera/ops/cpu/storage.h"
#include "tessera/ops/cpu/unary_spans.h"
#include "tessera/ops/kernels/elementwise.h"

namespace tessera {

namespace {

using cpu::Arr;
using cpu::CArr;
using cpu::unary_backward_span;
using cpu::unary_span;

template <class T>
void binary_span(BinaryOp op, const T* ap, const T* bp, T* op_, int64_t n) {
  CArr<T> a(ap, n), b(bp, n);
  Arr<T> o(op_, n);
  switch (op) {
    case BinaryOp::Add: o = a + b; break;
    case BinaryOp::Sub: o = a - b; break;
    case BinaryOp::Mul: o = a * b; break;
    case BinaryOp::Div: o = a / b; break;
    case BinaryOp::Pow: o = a.pow(b); break;
    case BinaryOp::Maximum: o = a.max(b); break;
    case BinaryOp::Minimum: o = a.min(b); break;
    default: break;  // comparisons are handled in compare()
  }
}

template <class S>
void compare(BinaryOp op, const Tensor& a, const Tensor& b, const Tensor& out) {
  auto plan = cpu::make_plan<3>(out.shape(), {&out, &a, &b});
  cpu::for_each_row(plan, [&](std::array<char*, 3> p, const std::array<int64_t, 3>& s, int64_t n) {
    bool* o = reinterpret_cast<bool*>(p[0]);
    const S* x = reinterpret_cast<const S*>(p[1]);
    const S* y = reinterpret_cast<const S*>(p[2]);
    for (int64_t i = 0; i < n; ++i) {
      // A bfloat16 converts to float32 exactly: comparing the floats compares the stored values.
      const cpu::compute_t<S> u = cpu::value(x[i * s[1]]), v = cpu::value(y[i * s[2]]);
      bool r = false;
      switch (op) {
        case BinaryOp::Eq: r = u == v; break;
        case BinaryOp::Ne: r = u != v; break;
        case BinaryOp::Lt: r = u < v; break;
        case BinaryOp::Le: r = u <= v; break;
        case BinaryOp::Gt: r = u > v; break;
        case BinaryOp::Ge: r = u >= v; break;
        default: break;
      }
      o[i * s[0]] = r;
    }
  });
}

}  // namespace

namespace cpu {

void unary(const UnaryArgs& args, const Tensor& x, const Tensor& y) {
  TS_DISPATCH_STORED(x.dtype(), "unary", [&] {
    using T = compute_t<storage_t>;
    map_spans<storage_t, 1>(
        y, {&x}, [&](const std::array<const T*, 1>& in, T* out, int64_t n) { unary_span<T>(args, in[0], out, n); });
  });
}

void unary_backward(const UnaryArgs& args, const Tensor& x, const Tensor& y, const Tensor& gy, const Tensor& gx) {
  TS_DISPATCH_STORED(x.dtype(), "unary_backward", [&] {
    using T = compute_t<storage_t>;
    map_spans<storage_t, 3>(gx, {&x, &y, &gy}, [&](const std::array<const T*, 3>& in, T* out, int64_t n) {
      unary_backward_span<T>(args, in[0], in[1], in[2], out, n);
    });
  });
}

void binary(BinaryOp op, const Tensor& a, const Tensor& b, const Tensor& out) {
  if (is_comparison(op)) {
    TS_DISPATCH_STORED_ALL(a.dtype(), "compare", [&] { compare<storage_t>(op, a, b, out); });
    return;
  }
  if (a.dtype() == DType::Int64) {  // integer arithmetic (indices, counts): plain loop
    TS_CHECK(op == BinaryOp::Add || op == BinaryOp::Sub || op == BinaryOp::Mul || op == BinaryOp::Maximum ||
                 op == BinaryOp::Minimum,
             "binary op: int64 supports add, sub, mul, maximum and minimum only");
    cpu::map_spans<int64_t, 2>(out, {&a, &b}, [&](const std::array<const int64_t*, 2>& in, int64_t* o, int64_t n) {
      for (int64_t i = 0; i < n; ++i) {
        int64_t u = in[0][i], v = in[1][i];
        o[i] = op == BinaryOp::Add       ? u + v
               : op == BinaryOp::Sub     ? u - v
               : op == BinaryOp::Mul     ? u * v
               : op == BinaryOp::Maximum ? std::max(u, v)
                                         : std::min(u, v);
      }
    });
    return;
  }
  TS_DISPATCH_STORED(a.dtype(), "binary", [&] {
    using T = compute_t<storage_t>;
    map_spans<storage_t, 2>(out, {&a, &b}, [&](const std::array<const T*, 2>& in, T* o, int64_t n) {
      binary_span<T>(op, in[0], in[1], o, n);
    });
  });
}

void where(const Tensor& cond, const Tensor& a, const Tensor& b, const Tensor& out) {
  TS_DISPATCH_STORED_ALL(a.dtype(), "where", [&] {
    using scalar_t = storage_t;  // values are moved, not computed on
    auto plan = cpu::make_plan<4>(out.shape(), {&out, &cond, &a, &b});
    cpu::for_each_row(plan, [&](std::array<char*, 4> p, const std::array<int64_t, 4>& s, int64_t n) {
      scalar_t* o = reinterpret_cast<scalar_t*>(p[0]);
      const bool* c = reinterpret_cast<const bool*>(p[1]);
      const scalar_t* x = reinterpret_cast<const scalar_t*>(p[2]);
      const scalar_t* y = reinterpret_cast<const scalar_t*>(p[3]);
      for (int64_t i = 0; i < n; ++i) o[i * s[0]] = c[i * s[1]] ? x[i * s[2]] : y[i * s[3]];
    });
  });
}

}  // namespace cpu

}  // namespace tessera
