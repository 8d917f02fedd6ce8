// Kernel interface of the fused ops (internal; ops/fused.h says what they compute). The front end
// (ops/fused.cpp) passes contiguous tensors viewed as [rows, C] over their last dim.
#pragma once
#include "core/dispatch.h"
#include "core/tensor.h"

namespace tessera {

// y = x + s[r / rows_per_sample]·gamma[c]·f for row r, column c; sample_scale [B] (rows = B·rows
// per sample) or undefined (1).
using LayerScaleResidualKernel = void(const Tensor& x, const Tensor& f, const Tensor& gamma,
                                      const Tensor& sample_scale, const Tensor& y);
// From the output gradient g: gf = g·s·gamma (when gf is defined) and ggamma[c] = Σ_rows g·s·f
// (when ggamma is defined; accumulated in double, in an order that does not depend on the launch).
using LayerScaleResidualBackwardKernel = void(const Tensor& g, const Tensor& f, const Tensor& gamma,
                                              const Tensor& sample_scale, const Tensor& gf, const Tensor& ggamma);
// pre ← pre + bias (in place: kept for the backward), y = gelu(pre) (the erf form, or tanh).
using BiasGeluKernel = void(const Tensor& pre, const Tensor& bias, bool approximate, const Tensor& y);
// gpre = g·gelu'(pre), gbias[c] = Σ_rows gpre (when defined; double, launch-independent order).
using BiasGeluBackwardKernel = void(const Tensor& g, const Tensor& pre, bool approximate, const Tensor& gpre,
                                   const Tensor& gbias);

// XCA's attention map over M = B·h matrices of d×d (rows i, columns j), with q̄ = max(nq, eps) and
// k̄ = max(nk, eps) (the row norms of q and k over the tokens) and t = temperature[m % h]:
//   z[m,i,j] = t·c[m,i,j],  c = s[m,i,j] / (q̄[m,i]·k̄[m,j]),  a[m,i,:] = softmax(z[m,i,:]).
// s [M, d, d] (= q·kᵀ), nq and nk [M, d], t [h], a [M, d, d]; all contiguous.
using CosineSoftmaxKernel = void(const Tensor& s, const Tensor& nq, const Tensor& nk, const Tensor& t, double eps,
                                 const Tensor& a);
// From ga = ∂L/∂a, with gz = a ⊙ (ga − Σ_j ga·a) (softmax's backward per row):
//   gs = gz·t / (q̄·k̄),  row_terms[m,i] = Σ_j gz·c,  col_terms[m,j] = Σ_i gz·c
// (the front end turns the terms into the gradients of q̄, k̄ and t). Sums in a fixed order.
using CosineSoftmaxBackwardKernel = void(const Tensor& ga, const Tensor& a, const Tensor& s, const Tensor& nq,
                                         const Tensor& nk, const Tensor& t, double eps, const Tensor& gs,
                                         const Tensor& row_terms, const Tensor& col_terms);

extern KernelTable<LayerScaleResidualKernel> layer_scale_residual_kernel;
extern KernelTable<LayerScaleResidualBackwardKernel> layer_scale_residual_backward_kernel;
extern KernelTable<BiasGeluKernel> bias_gelu_kernel;
extern KernelTable<BiasGeluBackwardKernel> bias_gelu_backward_kernel;
extern KernelTable<CosineSoftmaxKernel> cosine_softmax_kernel;
extern KernelTable<CosineSoftmaxBackwardKernel> cosine_softmax_backward_kernel;

}  // namespace tessera
