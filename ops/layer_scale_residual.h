// layer_scale_residual, a fused op (ops/fused.h): the residual connection with LayerScale and
// stochastic depth's per-sample scale in one pass. Checks, dispatch and gradient: ops/layer_scale_residual.cpp.
#pragma once
#include "tessera/core/tensor.h"

namespace tessera {

// y = x + s · (gamma ⊙ f): a residual connection with LayerScale (CaiT §2.1, Eq. 3; XCiT's η
// gammas), gamma [C] over the last dim of x and f (same shape), and s an optional per-sample scale
// [B] over the first dim — stochastic depth's mask/(1 − p) — or undefined (1). One pass forward;
// the backward makes gf and gamma's gradient in one pass too.
Tensor layer_scale_residual(const Tensor& x, const Tensor& f, const Tensor& gamma,
                            const Tensor& sample_scale = Tensor());

}  // namespace tessera
