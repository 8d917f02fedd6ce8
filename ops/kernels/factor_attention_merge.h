// Kernel interface of factor_attention_merge (internal; ops/factor_attention_merge.h says what it
// computes). The front end (ops/factor_attention_merge.cpp) passes the operands as they come, any
// strides, and a contiguous output.
#pragma once
#include "tessera/core/dispatch.h"
#include "tessera/core/tensor.h"
#include "tessera/ops/kernels/strides4.h"

namespace tessera {

// CoaT's attention output (Eq. 12) in token layout, for m and q [B, h, N, d] and cv [B, h, N−1, d]:
//   y[b, n, h·d + c] = scale·m[b, h, n, c] + (n ≥ 1 ? q[b, h, n, c]·cv[b, h, n−1, c] : 0).
// m, q and cv may have any strides (read through strides4); y is contiguous [B, N, h·d].
using FactorAttentionMergeKernel = void(const Tensor& m, const Tensor& q, const Tensor& cv, double scale,
                                        const Tensor& y);
// From g [B, N, h·d] (contiguous): gm = scale·g, gq = g·cv (0 for n = 0), gcv = g·q, each written
// contiguous in its operand's shape when defined.
using FactorAttentionMergeBackwardKernel = void(const Tensor& g, const Tensor& q, const Tensor& cv, double scale,
                                                const Tensor& gm, const Tensor& gq, const Tensor& gcv);

}  // namespace tessera
