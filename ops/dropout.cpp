// Inverted dropout: y = x·mask/(1−p) with mask ~ Bernoulli(1−p) drawn from the Generator. Composed
// from rand/where/mul, so it runs on every device and its gradient, g·mask/(1−p), comes from mul
// (the scaled mask is a constant).
#include "tessera/ops/dropout.h"

#include <cmath>

#include "tessera/ops/elementwise.h"

namespace tessera {

Tensor dropout(const Tensor& x, double p, bool training, Generator* gen) {
  TS_CHECK(x.defined(), "dropout: input is an undefined tensor");
  TS_CHECK(is_floating(x.dtype()), "dropout: expected a floating input, got ", describe(x));
  TS_CHECK(p >= 0.0 && p <= 1.0, "dropout: probability p must be in [0, 1], got ", p);
  if (!training || p == 0.0) return x;
  if (p == 1.0) return x * 0.0;  // everything dropped; the gradient is zero too
  // Uniforms are drawn in float64, on x's device, so that keep = (u < 1−p) has probability exactly
  // 1−p and the mask is the same on every device; the scaled mask is built in x's dtype.
  Tensor u = rand(x.shape(), DType::Float64, gen, x.device());
  Tensor keep = lt(u, constant_scalar(1.0 - p, u));
  Tensor mask = where(keep, constant_scalar(1.0 / (1.0 - p), x), constant_scalar(0.0, x));
  return x * mask;
}

}  // namespace tessera
