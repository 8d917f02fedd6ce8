// Kernel interface of layer_scale_residual (internal; ops/layer_scale_residual.h says what it
// computes). The front end (ops/layer_scale_residual.cpp) passes contiguous tensors viewed as
// [rows, C] over their last dim.
#pragma once
#include <cstdint>

#include "tessera/core/dispatch.h"
#include "tessera/core/tensor.h"

namespace tessera {

// A [rows, C] view of x (or f, g) over its last dim, for the kernels of every device.
struct RowLayout {
  int64_t rows, C, per_sample;  // per_sample: rows that share one entry of the sample scale
};

inline RowLayout row_layout(const Tensor& t, const Tensor& sample_scale) {
  const int64_t C = t.shape().back(), rows = C > 0 ? t.numel() / C : 0;
  return {rows, C, sample_scale.defined() && sample_scale.numel() > 0 ? rows / sample_scale.numel() : rows};
}

// y = x + s[r / rows_per_sample]·gamma[c]·f for row r, column c; sample_scale [B] (rows = B·rows
// per sample) or undefined (1).
using LayerScaleResidualKernel = void(const Tensor& x, const Tensor& f, const Tensor& gamma, const Tensor& sample_scale,
                                      const Tensor& y);
// From the output gradient g: gf = g·s·gamma (when gf is defined) and ggamma[c] = Σ_rows g·s·f
// (when ggamma is defined; accumulated in double, in an order that does not depend on the launch).
using LayerScaleResidualBackwardKernel = void(const Tensor& g, const Tensor& f, const Tensor& gamma,
                                              const Tensor& sample_scale, const Tensor& gf, const Tensor& ggamma);

}  // namespace tessera
