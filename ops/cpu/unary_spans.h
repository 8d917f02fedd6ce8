// The unary activation formulas (ops/kernels/unary_formulas.h) on contiguous spans (internal),
// vectorised as Eigen array expressions: the elementwise kernels and the fused bias + GELU share
// them.
#pragma once
#include <cstdint>

#include <Eigen/Core>
#include <unsupported/Eigen/SpecialFunctions>

#include "tessera/ops/kernels/unary_formulas.h"

namespace tessera::cpu {

template <class T>
using CArr = Eigen::Map<const Eigen::Array<T, Eigen::Dynamic, 1>>;
template <class T>
using Arr = Eigen::Map<Eigen::Array<T, Eigen::Dynamic, 1>>;

// The formulas' functions spelled for Eigen arrays and array expressions.
struct EigenMath {
  template <class E>
  static auto exp(const E& e) {
    return e.exp();
  }
  template <class E>
  static auto log(const E& e) {
    return e.log();
  }
  template <class E>
  static auto sqrt(const E& e) {
    return e.sqrt();
  }
  template <class E>
  static auto rsqrt(const E& e) {
    return e.rsqrt();
  }
  template <class E>
  static auto abs(const E& e) {
    return e.abs();
  }
  template <class E>
  static auto tanh(const E& e) {
    return e.tanh();
  }
  template <class E>
  static auto erf(const E& e) {
    return e.erf();
  }
  template <class E>
  static auto sin(const E& e) {
    return e.sin();
  }
  template <class E>
  static auto cos(const E& e) {
    return e.cos();
  }
  template <class E>
  static auto sign(const E& e) {
    return e.sign();
  }
  template <class E, class S>
  static auto pow(const E& e, S p) {
    return e.pow(p);
  }
  template <class E, class S>
  static auto min(const E& e, S c) {
    return e.min(c);
  }
  template <class E, class S>
  static auto max(const E& e, S c) {
    return e.max(c);
  }
  template <class C, class A, class B>
  static auto select(const C& cond, const A& a, const B& b) {
    return cond.select(a, b);
  }
};

// y = f(x) over n elements.
template <class T>
inline void unary_span(const UnaryArgs& a, const T* xp, T* yp, int64_t n) {
  Arr<T> y(yp, n);
  unary_formula<EigenMath, T>(a, CArr<T>(xp, n), [&](const auto& value) { y = value; });
}

// gx = g · f'(x) over n elements, from x and/or y = f(x).
template <class T>
inline void unary_backward_span(const UnaryArgs& a, const T* xp, const T* yp, const T* gp, T* op, int64_t n) {
  Arr<T> gx(op, n);
  unary_derivative_formula<EigenMath, T>(a, CArr<T>(xp, n), CArr<T>(yp, n), CArr<T>(gp, n),
                                         [&](const auto& value) { gx = value; });
}

}  // namespace tessera::cpu
