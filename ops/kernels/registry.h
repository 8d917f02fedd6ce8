// The one list of kernel tables. Every device-dispatched kernel appears here once, as
//   X(name, Signature, family, the public ops it serves)
// and everything that enumerates kernels is generated from it: the tables' declarations (below)
// and definitions with their CPU slots (ops/cpu/tables.cpp), the CPU and CUDA kernel
// declarations (ops/cpu/kernels.h, cuda/kernels.h), the CUDA backend's slot fills (cuda/backend.cpp)
// and the op × device listing of `tessera ops` (kernel_tables() below). A kernel is written under
// its table's name, cpu::name in ops/cpu/F.cpp and cuda::name in cuda/kernels/F.cu; one that is
// missing fails the link of the build that lacks it.
#pragma once
#include <vector>

#include "tessera/ops/kernels/checks.h"
#include "tessera/ops/kernels/class_attention.h"
#include "tessera/ops/kernels/conv.h"
#include "tessera/ops/kernels/copy.h"
#include "tessera/ops/kernels/depthwise_conv2d_gelu.h"
#include "tessera/ops/kernels/elementwise.h"
#include "tessera/ops/kernels/factor_attention.h"
#include "tessera/ops/kernels/factor_attention_merge.h"
#include "tessera/ops/kernels/indexing.h"
#include "tessera/ops/kernels/interpolate.h"
#include "tessera/ops/kernels/layer_scale_residual.h"
#include "tessera/ops/kernels/linalg.h"
#include "tessera/ops/kernels/linear_gelu.h"
#include "tessera/ops/kernels/loss.h"
#include "tessera/ops/kernels/normalization.h"
#include "tessera/ops/kernels/optim.h"
#include "tessera/ops/kernels/random.h"
#include "tessera/ops/kernels/reduce.h"
#include "tessera/ops/kernels/softmax.h"
#include "tessera/ops/kernels/talking_heads_attention.h"
#include "tessera/ops/kernels/xca_attention.h"
#include "tessera/ops/kernels/xca_attention_map.h"
#include "tessera/ops/kernels/xnorm_matmul.h"

#define TESSERA_KERNEL_TABLES(X)                                                                                    \
  X(copy, CopyKernel, "copy", "copy_, clone, contiguous, to(dtype), cat, reshape of a non-viewable tensor")         \
  X(fill, FillKernel, "copy", "fill_, zeros, ones, full")                                                           \
  X(embed, EmbedKernel, "copy", "embed, pad; the gradients of select, slice and pad")                               \
  X(cast_all, CastAllKernel, "copy", "cast_all (a model's weights under autocast) and its gradient")                \
  X(cat, CatKernel, "copy", "cat, stack; the gradients of split, chunk and unbind")                                 \
  X(random, RandomKernel, "random", "rand, randn, trunc_normal, dropout, drop_path")                                \
  X(check_range, CheckRangeKernel, "checks", "index checks of index_select and gather, cross_entropy targets")      \
  X(unary, UnaryKernel, "elementwise",                                                                              \
    "neg, exp, log, sqrt, rsqrt, abs, tanh, erf, sin, cos, sigmoid, silu, relu, gelu, pow, clamp")                  \
  X(unary_backward, UnaryBackwardKernel, "elementwise", "the gradients of the unary ops")                           \
  X(binary, BinaryKernel, "elementwise", "add, sub, mul, div, pow, maximum, minimum, eq, ne, lt, le, gt, ge")       \
  X(where, WhereKernel, "elementwise", "where, masked_fill")                                                        \
  X(reduce, ReduceKernel, "reduce", "sum, amax, mean, var, norm, sum_to")                                           \
  X(argmax, ArgmaxKernel, "reduce", "argmax")                                                                       \
  X(softmax, SoftmaxKernel, "softmax", "softmax, log_softmax")                                                      \
  X(softmax_backward, SoftmaxBackwardKernel, "softmax", "the gradients of softmax, log_softmax")                    \
  X(layer_norm, LayerNormKernel, "normalization", "layer_norm")                                                     \
  X(layer_norm_backward, LayerNormBackwardKernel, "normalization", "the gradient of layer_norm")                    \
  X(batch_norm_stats, BatchNormStatsKernel, "normalization", "batch_norm (training statistics)")                    \
  X(channel_grad_sums, ChannelGradSumsKernel, "normalization", "the gradient of batch_norm")                        \
  X(channel_affine, ChannelAffineKernel, "normalization", "batch_norm and its gradient")                            \
  X(batch_norm_coefficients, BatchNormCoefficientsKernel, "normalization",                                          \
    "batch_norm (per-channel scale and shift, running statistics)")                                                 \
  X(batch_norm_backward_coefficients, BatchNormBackwardCoefficientsKernel, "normalization",                         \
    "the gradient of batch_norm (per-channel coefficients)")                                                        \
  X(cross_entropy, CrossEntropyKernel, "loss", "cross_entropy, soft_cross_entropy")                                 \
  X(cross_entropy_backward, CrossEntropyBackwardKernel, "loss", "their gradients")                                  \
  X(gather, GatherKernel, "indexing", "gather, index_select")                                                       \
  X(scatter_add, ScatterAddKernel, "indexing", "the gradients of gather, index_select")                             \
  X(interpolate, InterpolateKernel, "interpolate", "interpolate (bilinear, bicubic)")                               \
  X(interpolate_backward, InterpolateBackwardKernel, "interpolate", "the gradient of interpolate")                  \
  X(matmul, MatmulKernel, "linalg", "matmul, linear, and their gradients")                                          \
  X(conv2d, Conv2dKernel, "conv", "conv2d, conv1d")                                                                 \
  X(conv2d_backward, Conv2dBackwardKernel, "conv", "their gradients")                                               \
  X(adam, AdamKernel, "optim", "adamw_update_ (with clipping's scale and the EMA fused in)")                        \
  X(sgd, SgdKernel, "optim", "sgd_update_")                                                                         \
  X(sum_squares, SumSquaresKernel, "optim", "sum_of_squares, clip_grad_norm")                                       \
  X(scale, ScaleKernel, "optim", "scale_, clip_grad_norm")                                                          \
  X(lerp, LerpKernel, "optim", "lerp_ (model EMA)")                                                                 \
  X(unscale, UnscaleKernel, "optim", "unscale_ (mixed-precision loss scaling)")                                     \
  X(layer_scale_residual, LayerScaleResidualKernel, "layer_scale_residual", "layer_scale_residual (x + s·gamma·f)") \
  X(layer_scale_residual_backward, LayerScaleResidualBackwardKernel, "layer_scale_residual", "its gradient")        \
  X(linear_gelu, LinearGeluKernel, "linear_gelu", "linear_gelu (the GEMM's bias and GELU in one pass)")             \
  X(linear_gelu_backward, LinearGeluBackwardKernel, "linear_gelu",                                                  \
    "its gradient (GELU's derivative and the bias sum)")                                                            \
  X(depthwise_conv2d_gelu, DepthwiseConv2dGeluKernel, "depthwise_conv2d_gelu",                                      \
    "depthwise_conv2d_gelu (a depthwise convolution, its bias and GELU in one pass)")                               \
  X(depthwise_conv2d_gelu_backward, DepthwiseConv2dGeluBackwardKernel, "depthwise_conv2d_gelu",                     \
    "its gradient through GELU (the convolution's own are conv2d_backward's)")                                      \
  X(xca_attention_map, XcaAttentionMapKernel, "xca_attention_map",                                                  \
    "xca_attention_map (XCA's normalize, temperature, softmax)")                                                    \
  X(xca_attention_map_backward, XcaAttentionMapBackwardKernel, "xca_attention_map", "its gradient")                 \
  X(xca_attention, XcaAttentionKernel, "xca_attention", "xca_attention (XCA from qkv to the tokens)")               \
  X(xca_attention_backward, XcaAttentionBackwardKernel, "xca_attention", "its gradient")                            \
  X(factor_attention, FactorAttentionKernel, "factor_attention",                                                    \
    "factor_attention (CoaT's attention + CRPE from qkv to the tokens)")                                            \
  X(factor_attention_backward, FactorAttentionBackwardKernel, "factor_attention", "its gradient")                   \
  X(factor_attention_merge, FactorAttentionMergeKernel, "factor_attention_merge",                                   \
    "factor_attention_merge (CoaT's output + CRPE)")                                                                \
  X(factor_attention_merge_backward, FactorAttentionMergeBackwardKernel, "factor_attention_merge", "its gradient")  \
  X(class_attention, ClassAttentionKernel, "class_attention", "class_attention (CaiT's one-query attention)")       \
  X(class_attention_backward, ClassAttentionBackwardKernel, "class_attention", "its gradient")                      \
  X(xnorm_matmul, XnormMatmulKernel, "xnorm_matmul", "xnorm_matmul (UFO-ViT's XNorm of the queries)")               \
  X(xnorm_matmul_backward, XnormMatmulBackwardKernel, "xnorm_matmul", "its gradient")                               \
  X(talking_heads_attention, TalkingHeadsAttentionKernel, "talking_heads_attention",                                \
    "talking_heads_attention (CaiT's self-attention, no N×N map in memory)")                                        \
  X(talking_heads_attention_backward, TalkingHeadsAttentionBackwardKernel, "talking_heads_attention", "its gradient")

namespace tessera {

// The tables themselves (defined, with their CPU slots, in ops/cpu/tables.cpp).
#define TS_DECLARE_TABLE(name, Signature, family, serves) extern KernelTable<Signature> name##_kernel;
TESSERA_KERNEL_TABLES(TS_DECLARE_TABLE)
#undef TS_DECLARE_TABLE

// One row of the listing: a kernel table and which device types fill it.
struct KernelTableInfo {
  const char* name;
  const char* family;
  const char* serves;
  bool (*has)(DeviceType type);
};

// Every table of TESSERA_KERNEL_TABLES, in its order.
const std::vector<KernelTableInfo>& kernel_tables();

}  // namespace tessera
