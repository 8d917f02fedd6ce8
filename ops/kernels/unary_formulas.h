// The unary activation formulas and their derivatives, written once for every device. A CPU kernel
// evaluates them on a whole contiguous span as Eigen array expressions (ops/cpu/unary_spans.h); a
// CUDA thread on one element (cuda/unary_math.h). What differs between the two is only how a
// function is spelled (x.exp() against dm::exp(x), cond.select(a, b) against cond ? a : b), so the
// formulas take the spelling as a policy M, and hand their result to `put`, because the Eigen
// expression of each case has a type of its own.
//
//   M::exp, log, sqrt, rsqrt, abs, tanh, erf, sin, cos, sign, pow(x, p), min(x, c), max(x, c),
//   M::select(cond, a, b)          — elementwise cond ? a : b
#pragma once
#include "tessera/core/host_device.h"
#include "tessera/ops/kernels/elementwise.h"

namespace tessera {

namespace unary_constants {
constexpr double kSqrtHalf = 0.70710678118654752440;       // 1/√2
constexpr double kInvSqrt2Pi = 0.39894228040143267794;     // 1/√(2π)
constexpr double kTwoOverSqrtPi = 1.12837916709551257390;  // 2/√π
constexpr double kGeluTanhK = 0.79788456080286535588;      // √(2/π)
constexpr double kGeluTanhC = 0.044715;
}  // namespace unary_constants

// put(f(x)) for the op of `a`; T is the element type, X a scalar T or an array of them.
// (nv_exec_check_disable: the CUDA instantiation calls the device-only math of its policy, and
// nothing instantiates that one for the host.)
#ifdef __CUDACC__
#pragma nv_exec_check_disable
#endif
template <class M, class T, class X, class Put>
TS_HOST_DEVICE void unary_formula(const UnaryArgs& a, const X& x, Put&& put) {
  using namespace unary_constants;
  const T one(1), half(0.5);
  switch (a.op) {
    case UnaryOp::Neg: return put(-x);
    case UnaryOp::Exp: return put(M::exp(x));
    case UnaryOp::Log: return put(M::log(x));
    case UnaryOp::Sqrt: return put(M::sqrt(x));
    case UnaryOp::Rsqrt: return put(M::rsqrt(x));
    case UnaryOp::Abs: return put(M::abs(x));
    case UnaryOp::Tanh: return put(M::tanh(x));
    case UnaryOp::Erf: return put(M::erf(x));
    case UnaryOp::Sin: return put(M::sin(x));
    case UnaryOp::Cos: return put(M::cos(x));
    case UnaryOp::Sigmoid: return put(one / (one + M::exp(-x)));
    case UnaryOp::Silu: return put(x / (one + M::exp(-x)));
    case UnaryOp::Relu: return put(M::select(x > T(0), x, T(0)));
    case UnaryOp::GeluErf: return put(half * x * (one + M::erf(x * T(kSqrtHalf))));
    case UnaryOp::GeluTanh: return put(half * x * (one + M::tanh(T(kGeluTanhK) * (x + T(kGeluTanhC) * x * x * x))));
    case UnaryOp::Pow:
      if (a.a == 2.0) return put(x * x);
      return put(M::pow(x, T(a.a)));
    case UnaryOp::Clamp: return put(M::min(M::max(x, T(a.a)), T(a.b)));
  }
}

// put(g · f'(x)), from x and/or y = f(x) (whichever is cheaper: exp, sqrt, tanh and sigmoid reuse
// their output) and the upstream gradient g.
#ifdef __CUDACC__
#pragma nv_exec_check_disable
#endif
template <class M, class T, class X, class Put>
TS_HOST_DEVICE void unary_derivative_formula(const UnaryArgs& a, const X& x, const X& y, const X& g, Put&& put) {
  using namespace unary_constants;
  const T one(1), half(0.5);
  switch (a.op) {
    case UnaryOp::Neg: return put(-g);
    case UnaryOp::Exp: return put(g * y);
    case UnaryOp::Log: return put(g / x);
    case UnaryOp::Sqrt: return put(g * half / y);
    case UnaryOp::Rsqrt: return put(g * T(-0.5) * y * y * y);
    case UnaryOp::Abs: return put(g * M::sign(x));
    case UnaryOp::Tanh: return put(g * (one - y * y));
    case UnaryOp::Erf: return put(g * T(kTwoOverSqrtPi) * M::exp(-x * x));
    case UnaryOp::Sin: return put(g * M::cos(x));
    case UnaryOp::Cos: return put(-g * M::sin(x));
    case UnaryOp::Sigmoid: return put(g * y * (one - y));
    case UnaryOp::Silu: {
      const auto s = one / (one + M::exp(-x));
      return put(g * s * (one + x * (one - s)));
    }
    case UnaryOp::Relu: return put(M::select(x > T(0), g, T(0)));
    case UnaryOp::GeluErf:  // d/dx x·Φ(x) = Φ(x) + x·φ(x)
      return put(g * (half * (one + M::erf(x * T(kSqrtHalf))) + x * T(kInvSqrt2Pi) * M::exp(T(-0.5) * x * x)));
    case UnaryOp::GeluTanh: {
      const auto t = M::tanh(T(kGeluTanhK) * (x + T(kGeluTanhC) * x * x * x));
      return put(g * (half * (one + t) + half * x * (one - t * t) * T(kGeluTanhK) * (one + T(3 * kGeluTanhC) * x * x)));
    }
    case UnaryOp::Pow:
      if (a.a == 0.0) return put(g * T(0));
      if (a.a == 2.0) return put(g * T(2) * x);
      return put(g * T(a.a) * M::pow(x, T(a.a - 1)));
    case UnaryOp::Clamp: return put(M::select(x >= T(a.a) && x <= T(a.b), g, T(0)));
  }
}

}  // namespace tessera
