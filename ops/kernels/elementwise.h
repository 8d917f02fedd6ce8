// Kernel interface of the elementwise family (internal). Front ends in ops/elementwise.cpp
// allocate contiguous outputs and pass inputs already expanded to the output shape (stride 0 on
// broadcast dims), so a kernel only has to walk same-shaped strided operands.
#pragma once
#include <cstdint>

#include "tessera/core/dispatch.h"
#include "tessera/core/tensor.h"

namespace tessera {

enum class UnaryOp : uint8_t {
  Neg,
  Exp,
  Log,
  Sqrt,
  Rsqrt,
  Abs,
  Tanh,
  Erf,
  Sin,
  Cos,
  Sigmoid,
  Silu,
  Relu,
  GeluErf,
  GeluTanh,
  Pow,    // x^p, p = UnaryArgs::a
  Clamp,  // min(max(x, a), b)
};
struct UnaryArgs {
  UnaryOp op;
  double a = 0.0, b = 0.0;
};

enum class BinaryOp : uint8_t { Add, Sub, Mul, Div, Pow, Maximum, Minimum, Eq, Ne, Lt, Le, Gt, Ge };
inline bool is_comparison(BinaryOp op) { return op >= BinaryOp::Eq; }

// y = f(x).
using UnaryKernel = void(const UnaryArgs& args, const Tensor& x, const Tensor& y);
// gx = gy · f'(x), using x and/or y = f(x) (whichever the formula needs; the other may be any
// tensor of the same shape).
using UnaryBackwardKernel = void(const UnaryArgs& args, const Tensor& x, const Tensor& y, const Tensor& gy,
                                 const Tensor& gx);
// out = a ∘ b; out is bool for comparisons, else the inputs' dtype.
using BinaryKernel = void(BinaryOp op, const Tensor& a, const Tensor& b, const Tensor& out);
// out = cond ? a : b.
using WhereKernel = void(const Tensor& cond, const Tensor& a, const Tensor& b, const Tensor& out);

}  // namespace tessera
