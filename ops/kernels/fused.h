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

extern KernelTable<LayerScaleResidualKernel> layer_scale_residual_kernel;
extern KernelTable<LayerScaleResidualBackwardKernel> layer_scale_residual_backward_kernel;
extern KernelTable<BiasGeluKernel> bias_gelu_kernel;
extern KernelTable<BiasGeluBackwardKernel> bias_gelu_backward_kernel;

}  // namespace tessera
