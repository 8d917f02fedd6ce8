// Kernel interface of the softmax family (internal). The front end (ops/softmax.cpp) passes
// contiguous tensors and the wrapped dim; a kernel views them as [outer, n, inner] with n the
// softmax dim, so the last-dim case (inner == 1, attention rows) and a middle dim (inner > 1,
// e.g. CoaT's k.softmax(dim=2)) are both single passes over memory.
#pragma once
#include <cstdint>

#include "tessera/core/dispatch.h"
#include "tessera/core/tensor.h"

namespace tessera {

enum class SoftmaxKind : uint8_t { Softmax, LogSoftmax };

// A contiguous tensor as [outer, n, inner] around the softmax dim.
struct SoftmaxLayout {
  int64_t outer = 1, n = 1, inner = 1;
};
inline SoftmaxLayout softmax_layout(const Tensor& t, int64_t dim) {
  SoftmaxLayout l;
  for (int64_t d = 0; d < t.dim(); ++d) {
    if (d < dim) l.outer *= t.shape()[d];
    else if (d > dim) l.inner *= t.shape()[d];
  }
  l.n = t.shape()[dim];
  return l;
}

// y = softmax(x) or log_softmax(x) along `dim`, max-subtracted. x, y contiguous, same shape.
using SoftmaxKernel = void(SoftmaxKind kind, const Tensor& x, int64_t dim, const Tensor& y);
// From the forward output y and the output gradient gy (contiguous, same shape):
//   softmax:     gx = y · (gy − Σ_dim gy·y)
//   log_softmax: gx = gy − exp(y) · Σ_dim gy
using SoftmaxBackwardKernel = void(SoftmaxKind kind, const Tensor& y, const Tensor& gy, int64_t dim, const Tensor& gx);

}  // namespace tessera
