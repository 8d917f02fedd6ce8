// The unary activation formulas on contiguous spans (internal), vectorised with Eigen array
// expressions: the elementwise kernels and the fused ones (bias + GELU) share them.
#pragma once
#include <cstdint>

#include <Eigen/Core>
#include <unsupported/Eigen/SpecialFunctions>

#include "tessera/ops/kernels/elementwise.h"

namespace tessera::cpu {

using namespace elementwise_constants;

template <class T> using CArr = Eigen::Map<const Eigen::Array<T, Eigen::Dynamic, 1>>;
template <class T> using Arr = Eigen::Map<Eigen::Array<T, Eigen::Dynamic, 1>>;

template <class T>
inline void unary_span(const UnaryArgs& a, const T* xp, T* yp, int64_t n) {
  CArr<T> x(xp, n);
  Arr<T> y(yp, n);
  const T one(1), half(0.5);
  switch (a.op) {
    case UnaryOp::Neg: y = -x; break;
    case UnaryOp::Exp: y = x.exp(); break;
    case UnaryOp::Log: y = x.log(); break;
    case UnaryOp::Sqrt: y = x.sqrt(); break;
    case UnaryOp::Rsqrt: y = x.rsqrt(); break;
    case UnaryOp::Abs: y = x.abs(); break;
    case UnaryOp::Tanh: y = x.tanh(); break;
    case UnaryOp::Erf: y = x.erf(); break;
    case UnaryOp::Sin: y = x.sin(); break;
    case UnaryOp::Cos: y = x.cos(); break;
    case UnaryOp::Sigmoid: y = one / (one + (-x).exp()); break;
    case UnaryOp::Silu: y = x / (one + (-x).exp()); break;
    case UnaryOp::Relu: y = (x > T(0)).select(x, T(0)); break;
    case UnaryOp::GeluErf: y = half * x * (one + (x * T(kSqrtHalf)).erf()); break;
    case UnaryOp::GeluTanh:
      y = half * x * (one + (T(kGeluTanhK) * (x + T(kGeluTanhC) * x.cube())).tanh());
      break;
    case UnaryOp::Pow:
      if (a.a == 2.0) y = x.square();
      else y = x.pow(T(a.a));
      break;
    case UnaryOp::Clamp: y = x.max(T(a.a)).min(T(a.b)); break;
  }
}

template <class T>
inline void unary_backward_span(const UnaryArgs& a, const T* xp, const T* yp, const T* gp, T* op, int64_t n) {
  CArr<T> x(xp, n), y(yp, n), g(gp, n);
  Arr<T> gx(op, n);
  const T one(1), half(0.5);
  switch (a.op) {
    case UnaryOp::Neg: gx = -g; break;
    case UnaryOp::Exp: gx = g * y; break;
    case UnaryOp::Log: gx = g / x; break;
    case UnaryOp::Sqrt: gx = g * half / y; break;
    case UnaryOp::Rsqrt: gx = g * T(-0.5) * y.cube(); break;
    case UnaryOp::Abs: gx = g * x.sign(); break;
    case UnaryOp::Tanh: gx = g * (one - y.square()); break;
    case UnaryOp::Erf: gx = g * T(kTwoOverSqrtPi) * (-x.square()).exp(); break;
    case UnaryOp::Sin: gx = g * x.cos(); break;
    case UnaryOp::Cos: gx = -g * x.sin(); break;
    case UnaryOp::Sigmoid: gx = g * y * (one - y); break;
    case UnaryOp::Silu: {
      auto s = one / (one + (-x).exp());
      gx = g * s * (one + x * (one - s));
      break;
    }
    case UnaryOp::Relu: gx = (x > T(0)).select(g, T(0)); break;
    case UnaryOp::GeluErf:  // d/dx x·Φ(x) = Φ(x) + x·φ(x)
      gx = g * (half * (one + (x * T(kSqrtHalf)).erf()) + x * T(kInvSqrt2Pi) * (T(-0.5) * x.square()).exp());
      break;
    case UnaryOp::GeluTanh: {
      auto t = (T(kGeluTanhK) * (x + T(kGeluTanhC) * x.cube())).tanh();
      gx = g * (half * (one + t) +
                half * x * (one - t.square()) * T(kGeluTanhK) * (one + T(3 * kGeluTanhC) * x.square()));
      break;
    }
    case UnaryOp::Pow:
      if (a.a == 0.0) gx = g * T(0);
      else if (a.a == 2.0) gx = g * T(2) * x;
      else gx = g * T(a.a) * x.pow(T(a.a - 1));
      break;
    case UnaryOp::Clamp: gx = (x >= T(a.a) && x <= T(a.b)).select(g, T(0)); break;
  }
}

}  // namespace tessera::cpu
