// What the convolution front ends share (internal): the argument checks and the output shape of
// conv2d and conv1d (ops/conv.cpp) and of depthwise_conv2d_gelu (ops/depthwise_conv2d_gelu.cpp).
#pragma once
#include <cstdint>
#include <utility>
#include <vector>

#include "tessera/core/tensor.h"
#include "tessera/ops/kernels/conv.h"
#include "tessera/ops/trace.h"

namespace tessera {

// Validates a convolution with `spatial` (1 or 2) spatial dims: x [N, C, *S], weight
// [O, C/groups, *K], bias [O] or undefined (PyTorch's semantics); every message names `op` and the
// offending shapes or values.
void check_conv(const char* op, int64_t spatial, const Tensor& x, const Tensor& weight, const Tensor& bias,
                const int64_t* stride, const int64_t* padding, const int64_t* dilation, int64_t groups);

// y's shape [N, O, OH, OW] for x [N, C, H, W] and w [O, C/groups, kH, kW]; per spatial dim
// out = (in + 2·padding − dilation·(k − 1) − 1) / stride + 1.
Shape conv2d_output_shape(const Shape& x, const Shape& w, const Conv2dParams& p);

// The arguments a traced convolution reports (stride, padding, dilation, groups), which its ONNX
// lowering reads (io/onnx/lowerings.h conv).
std::vector<std::pair<const char*, TraceValue>> conv_trace_args(const Conv2dParams& p);

}  // namespace tessera
