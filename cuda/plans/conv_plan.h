// Convolution plans: the arguments of cuDNN's convolution calls for one conv2d, as a pure,
// printable struct (no CUDA in it). On a GPU the plan becomes cuDNN descriptors
// (cuda/libs/cudnn_gpu.cpp); in the emulator a CPU reference of cuDNN's contract executes it
// (cuda/libs/cudnn_reference.cpp). tests/cuda/test_host_conv_plan.cpp checks plans by hand and, in
// the real build, against cuDNN's own output-size computation.
//
// cuDNN's terms: input x [N, C, H, W] and output y [N, K, P, Q] fully packed, both NCHW or both
// NHWC (channels innermost: a depthwise convolution of a token map, which the front end hands over
// channels-last under TESSERA_DEPTHWISE_CUDNN_NHWC, ops/kernels/conv.h); filter [K, C/groups, R, S]
// (an NHWC plan takes C/groups = 1 only, where cuDNN's NHWC filter [K, R, S, C/groups] is the same
// memory); zero padding, strides and dilations per spatial dim; CROSS_CORRELATION
// (what deep-learning frameworks call convolution); a group count; the math mode: plain FMA for
// float32 (no TF32, so results stay within float32 rounding of the CPU's) unless TF32 is allowed
// (core/autocast.h), tensor cores for bfloat16/float16 (accumulating in float32).
#pragma once
#include <cstdint>
#include <string>

#include "tessera/core/tensor.h"
#include "tessera/ops/kernels/conv.h"

namespace tessera::cuda {

enum class ConvMath : uint8_t { Fma, AllowTf32, TensorOp };
// The activations' layout: both packed in one of cuDNN's tensor formats.
enum class ConvFormat : uint8_t { Nchw, Nhwc };

struct ConvPlan {
  DType dtype = DType::Float32;
  ConvMath math = ConvMath::Fma;
  ConvFormat format = ConvFormat::Nchw;
  int n = 0, c = 0, h = 0, w = 0;  // input
  int k = 0, r = 0, s = 0;         // filter: output channels, kernel height and width
  int groups = 1;
  int pad_h = 0, pad_w = 0, stride_h = 1, stride_w = 1, dilation_h = 1, dilation_w = 1;
  int p = 0, q = 0;  // output height and width
  int channels_per_group() const { return c / groups; }
  std::string str() const;
  bool operator==(const ConvPlan&) const = default;
};

// The plan of conv2d_kernel's contract (ops/kernels/conv.h) for activations in `format`. cuDNN
// takes int dims: a larger tensor is an error naming the op.
ConvPlan plan_conv2d(const Shape& x, const Shape& w, const Conv2dParams& params, const Shape& y, DType dtype,
                     ConvFormat format = ConvFormat::Nchw);

}  // namespace tessera::cuda
