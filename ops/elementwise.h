// Elementwise ops with NumPy broadcasting. Every op here is differentiable in its floating inputs.
#pragma once
#include "tessera/core/tensor.h"

namespace tessera {

// ---- unary -------------------------------------------------------------------------------------
Tensor neg(const Tensor& x);
Tensor exp(const Tensor& x);
Tensor log(const Tensor& x);
Tensor sqrt(const Tensor& x);
Tensor rsqrt(const Tensor& x);
Tensor abs(const Tensor& x);
Tensor tanh(const Tensor& x);
Tensor erf(const Tensor& x);
Tensor sin(const Tensor& x);
Tensor cos(const Tensor& x);
Tensor sigmoid(const Tensor& x);
Tensor silu(const Tensor& x);
Tensor relu(const Tensor& x);
// GELU: exact 0.5·x·(1+erf(x/√2)) by default (timm's nn.GELU); approximate=true uses the tanh form.
Tensor gelu(const Tensor& x, bool approximate = false);
Tensor pow(const Tensor& x, double exponent);
// Clamps to [lo, hi]; the gradient passes where lo <= x <= hi (PyTorch's convention).
Tensor clamp(const Tensor& x, double lo, double hi);
Tensor clamp_min(const Tensor& x, double lo);
Tensor clamp_max(const Tensor& x, double hi);

// ---- binary (broadcasting) ---------------------------------------------------------------------
Tensor add(const Tensor& a, const Tensor& b);
Tensor sub(const Tensor& a, const Tensor& b);
Tensor mul(const Tensor& a, const Tensor& b);
Tensor div(const Tensor& a, const Tensor& b);
Tensor pow(const Tensor& a, const Tensor& b);
Tensor maximum(const Tensor& a, const Tensor& b);  // gradient to the larger (split evenly on ties)
Tensor minimum(const Tensor& a, const Tensor& b);

// Comparisons give bool tensors (no gradient).
Tensor eq(const Tensor& a, const Tensor& b);
Tensor ne(const Tensor& a, const Tensor& b);
Tensor lt(const Tensor& a, const Tensor& b);
Tensor le(const Tensor& a, const Tensor& b);
Tensor gt(const Tensor& a, const Tensor& b);
Tensor ge(const Tensor& a, const Tensor& b);

// where(cond, a, b): a where cond is true, else b (all three broadcast). cond is bool.
Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b);
// x with `value` where mask (bool, broadcast to x) is true.
Tensor masked_fill(const Tensor& x, const Tensor& mask, double value);

// Operators. Scalars become 0-d tensors of the other operand's dtype.
Tensor operator-(const Tensor& x);
Tensor operator+(const Tensor& a, const Tensor& b);
Tensor operator-(const Tensor& a, const Tensor& b);
Tensor operator*(const Tensor& a, const Tensor& b);
Tensor operator/(const Tensor& a, const Tensor& b);
Tensor operator+(const Tensor& a, double b);
Tensor operator-(const Tensor& a, double b);
Tensor operator*(const Tensor& a, double b);
Tensor operator/(const Tensor& a, double b);
Tensor operator+(double a, const Tensor& b);
Tensor operator-(double a, const Tensor& b);
Tensor operator*(double a, const Tensor& b);
Tensor operator/(double a, const Tensor& b);

}  // namespace tessera
