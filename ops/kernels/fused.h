// Kernel interface of the fused ops (internal; ops/fused.h says what they compute). The front end
// (ops/fused.cpp) passes contiguous tensors viewed as [rows, C] over their last dim.
#pragma once
#include "tessera/core/dispatch.h"
#include "tessera/core/host_device.h"
#include "tessera/core/tensor.h"

namespace tessera {

// The element offset of [i0, i1, i2, i3] in a 4-D view, for the attention kernels that read and
// write their operands through their strides (slices of a qkv projection, token-layout outputs)
// instead of making them contiguous first. An undefined tensor gives zero strides.
struct Strides4 {
  int64_t s[4];
  TS_HOST_DEVICE int64_t operator()(int64_t i0, int64_t i1, int64_t i2, int64_t i3) const {
    return i0 * s[0] + i1 * s[1] + i2 * s[2] + i3 * s[3];
  }
};
inline Strides4 strides4(const Tensor& t) {
  if (!t.defined()) return {{0, 0, 0, 0}};
  return {{t.stride(0), t.stride(1), t.stride(2), t.stride(3)}};
}

// y = x + s[r / rows_per_sample]·gamma[c]·f for row r, column c; sample_scale [B] (rows = B·rows
// per sample) or undefined (1).
using LayerScaleResidualKernel = void(const Tensor& x, const Tensor& f, const Tensor& gamma,
                                      const Tensor& sample_scale, const Tensor& y);
// From the output gradient g: gf = g·s·gamma (when gf is defined) and ggamma[c] = Σ_rows g·s·f
// (when ggamma is defined; accumulated in double, in an order that does not depend on the launch).
using LayerScaleResidualBackwardKernel = void(const Tensor& g, const Tensor& f, const Tensor& gamma,
                                              const Tensor& sample_scale, const Tensor& gf, const Tensor& ggamma);
// pre ← pre + bias (in place: kept for the backward), y = gelu(pre) (the erf form, or tanh).
using LinearGeluKernel = void(const Tensor& pre, const Tensor& bias, bool approximate, const Tensor& y);
// gpre = g·gelu'(pre), gbias[c] = Σ_rows gpre (when defined; double, launch-independent order).
using LinearGeluBackwardKernel = void(const Tensor& g, const Tensor& pre, bool approximate, const Tensor& gpre,
                                   const Tensor& gbias);

// XCA's attention map over M = B·h matrices of d×d (rows i, columns j), with q̄ = max(nq, eps) and
// k̄ = max(nk, eps) (the row norms of q and k over the tokens) and t = temperature[m % h]:
//   z[m,i,j] = t·c[m,i,j],  c = s[m,i,j] / (q̄[m,i]·k̄[m,j]),  a[m,i,:] = softmax(z[m,i,:]).
// s [M, d, d] (= q·kᵀ), nq and nk [M, d], t [h], a [M, d, d]; all contiguous.
using XcaAttentionMapKernel = void(const Tensor& s, const Tensor& nq, const Tensor& nk, const Tensor& t, double eps,
                                 const Tensor& a);
// From ga = ∂L/∂a, with gz = a ⊙ (ga − Σ_j ga·a) (softmax's backward per row):
//   gs = gz·t / (q̄·k̄),  row_terms[m,i] = Σ_j gz·c,  col_terms[m,j] = Σ_i gz·c
// (the front end turns the terms into the gradients of q̄, k̄ and t). Sums in a fixed order.
using XcaAttentionMapBackwardKernel = void(const Tensor& ga, const Tensor& a, const Tensor& s, const Tensor& nq,
                                         const Tensor& nk, const Tensor& t, double eps, const Tensor& gs,
                                         const Tensor& row_terms, const Tensor& col_terms);

// CoaT's attention output (Eq. 12) in token layout, for m and q [B, h, N, d] and cv [B, h, N−1, d]:
//   y[b, n, h·d + c] = scale·m[b, h, n, c] + (n ≥ 1 ? q[b, h, n, c]·cv[b, h, n−1, c] : 0).
// m, q and cv may have any strides (read through strides4); y is contiguous [B, N, h·d].
using FactorAttentionMergeKernel = void(const Tensor& m, const Tensor& q, const Tensor& cv, double scale,
                                        const Tensor& y);
// From g [B, N, h·d] (contiguous): gm = scale·g, gq = g·cv (0 for n = 0), gcv = g·q, each written
// contiguous in its operand's shape when defined.
using FactorAttentionMergeBackwardKernel = void(const Tensor& g, const Tensor& q, const Tensor& cv, double scale,
                                                const Tensor& gm, const Tensor& gq, const Tensor& gcv);

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

// UFO-ViT's XNorm of the queries folded into the product (Eq. 3, 6-7): for p = q·ctx [B, h, N, e]
// (contiguous) and the row norms nq [B, h, N] of q, with q̄ = max(nq, eps),
//   y[b, h, n, c] = (gamma[h] / q̄[b, h, n])·p[b, h, n, c],  y any strides (a token-layout view).
using XnormMatmulKernel = void(const Tensor& p, const Tensor& nq, const Tensor& gamma, double eps, const Tensor& y);
// From g (p's shape, any strides): gp = (gamma / q̄)·g (contiguous) and row_terms[b, h, n] =
// (Σ_c g·p) / q̄ (contiguous; the front end turns it into the gradients of q̄ and gamma).
using XnormMatmulBackwardKernel = void(const Tensor& g, const Tensor& p, const Tensor& nq, const Tensor& gamma,
                                        double eps, const Tensor& gp, const Tensor& row_terms);

}  // namespace tessera
