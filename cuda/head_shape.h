// The [B, h, N, d] shape of an attention operand, passed by value to the CUDA kernels of
// factor_attention_merge, class_attention and xnorm_matmul (internal).
#pragma once
#include <cstdint>

#include "tessera/core/tensor.h"

namespace tessera::cuda {

struct HeadShape {
  int64_t B, H, N, d;  // samples, heads, tokens, channels per head
};
inline HeadShape head_shape(const Tensor& t) { return {t.size(0), t.size(1), t.size(2), t.size(3)}; }

}  // namespace tessera::cuda
