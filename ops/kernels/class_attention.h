// Kernel interface of class_attention (internal; ops/class_attention.h says what it computes). The
// front end (ops/class_attention.cpp) passes its operands as strided views (k and v, and their
// gradients, with unit stride along d).
#pragma once
#include "tessera/core/dispatch.h"
#include "tessera/core/tensor.h"
#include "tessera/ops/kernels/strides4.h"

namespace tessera {

// CaiT's class attention (§3.3, one query token per head) for q [B, h, 1, d] and k, v [B, h, N, d],
// any strides with unit stride along d (so are gk and gv in the backward):  a[b, h, :] = softmax over the N tokens of scale·(k[b, h]·q[b, h]),
// y[b, h, 0, :] = a[b, h]·v[b, h]; a [B, h, N] contiguous, y any strides.
using ClassAttentionKernel = void(const Tensor& q, const Tensor& k, const Tensor& v, double scale, const Tensor& a,
                                  const Tensor& y);
// From g [B, h, 1, d] (any strides), with ga_n = g·v_n and gz_n = a_n·(ga_n − Σ_m a_m·ga_m) (the
// softmax's backward): gq = scale·Σ_n gz_n·k_n, gk_n = scale·gz_n·q, gv_n = a_n·g, each written
// through its strides when defined; every sum over the tokens in token order.
using ClassAttentionBackwardKernel = void(const Tensor& g, const Tensor& q, const Tensor& k, const Tensor& v,
                                          const Tensor& a, double scale, const Tensor& gq, const Tensor& gk,
                                          const Tensor& gv);

}  // namespace tessera
