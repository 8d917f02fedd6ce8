// Strided access to 4-D attention operands (internal, every device): the kernels of
// factor_attention_merge, class_attention and xnorm_matmul read and write [B, h, N, d] views
// through their strides with this one helper.
#pragma once
#include <cstdint>

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

}  // namespace tessera
