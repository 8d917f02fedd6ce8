// The unary activation formulas for CUDA kernels, one element at a time: the elementwise kernels
// and the fused ones (bias + GELU) share them. Same formulas as the CPU's (ops/cpu/unary_spans.h).
#pragma once
#include "tessera/cuda/device_math.h"
#include "tessera/ops/kernels/elementwise.h"

namespace tessera::cuda {

using namespace elementwise_constants;

template <class T>
__device__ T unary_value(const UnaryArgs& a, T x) {
  const T one(1), half(0.5);
  switch (a.op) {
    case UnaryOp::Neg: return -x;
    case UnaryOp::Exp: return dm::exp(x);
    case UnaryOp::Log: return dm::log(x);
    case UnaryOp::Sqrt: return dm::sqrt(x);
    case UnaryOp::Rsqrt: return dm::rsqrt(x);
    case UnaryOp::Abs: return dm::abs(x);
    case UnaryOp::Tanh: return dm::tanh(x);
    case UnaryOp::Erf: return dm::erf(x);
    case UnaryOp::Sin: return dm::sin(x);
    case UnaryOp::Cos: return dm::cos(x);
    case UnaryOp::Sigmoid: return one / (one + dm::exp(-x));
    case UnaryOp::Silu: return x / (one + dm::exp(-x));
    case UnaryOp::Relu: return x > T(0) ? x : T(0);
    case UnaryOp::GeluErf: return half * x * (one + dm::erf(x * T(kSqrtHalf)));
    case UnaryOp::GeluTanh: return half * x * (one + dm::tanh(T(kGeluTanhK) * (x + T(kGeluTanhC) * x * x * x)));
    case UnaryOp::Pow: return a.a == 2.0 ? x * x : dm::pow(x, T(a.a));
    case UnaryOp::Clamp: return dm::min(dm::max(x, T(a.a)), T(a.b));
  }
  return x;
}

// gy · f'(x), from x and/or y = f(x).
template <class T>
__device__ T unary_derivative(const UnaryArgs& a, T x, T y, T g) {
  const T one(1), half(0.5);
  switch (a.op) {
    case UnaryOp::Neg: return -g;
    case UnaryOp::Exp: return g * y;
    case UnaryOp::Log: return g / x;
    case UnaryOp::Sqrt: return g * half / y;
    case UnaryOp::Rsqrt: return g * T(-0.5) * y * y * y;
    case UnaryOp::Abs: return g * (x > T(0) ? one : (x < T(0) ? -one : T(0)));
    case UnaryOp::Tanh: return g * (one - y * y);
    case UnaryOp::Erf: return g * T(kTwoOverSqrtPi) * dm::exp(-x * x);
    case UnaryOp::Sin: return g * dm::cos(x);
    case UnaryOp::Cos: return -g * dm::sin(x);
    case UnaryOp::Sigmoid: return g * y * (one - y);
    case UnaryOp::Silu: {
      const T s = one / (one + dm::exp(-x));
      return g * s * (one + x * (one - s));
    }
    case UnaryOp::Relu: return x > T(0) ? g : T(0);
    case UnaryOp::GeluErf:  // d/dx x·Φ(x) = Φ(x) + x·φ(x)
      return g * (half * (one + dm::erf(x * T(kSqrtHalf))) + x * T(kInvSqrt2Pi) * dm::exp(T(-0.5) * x * x));
    case UnaryOp::GeluTanh: {
      const T t = dm::tanh(T(kGeluTanhK) * (x + T(kGeluTanhC) * x * x * x));
      return g * (half * (one + t) + half * x * (one - t * t) * T(kGeluTanhK) * (one + T(3 * kGeluTanhC) * x * x));
    }
    case UnaryOp::Pow:
      if (a.a == 0.0) return g * T(0);
      if (a.a == 2.0) return g * T(2) * x;
      return g * T(a.a) * dm::pow(x, T(a.a - 1));
    case UnaryOp::Clamp: return x >= T(a.a) && x <= T(a.b) ? g : T(0);
  }
  return g;
}

}  // namespace tessera::cuda
