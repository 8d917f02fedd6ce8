// Executes convolution plans (cuda/plans/conv_plan.h) on a device's stream: with cuDNN on a GPU
// (cudnn_gpu.cpp), with a CPU reference of cuDNN's contract in the emulator (cudnn_reference.cpp).
// Every output is overwritten (beta = 0). Tensors are packed in the plan's format (NCHW or NHWC);
// the filter is [K, C/groups, R, S]. One library call each.
#pragma once
#include <array>
#include <string>

#include "tessera/cuda/plans/conv_plan.h"
#include "tessera/cuda/runtime.h"

namespace tessera::cuda {

// y = x ⋆ w
void conv_forward(const ConvPlan& plan, const void* x, const void* w, void* y, cudaStream_t stream, int device);
// dx = the gradient of conv_forward w.r.t. x for output gradient dy
void conv_backward_data(const ConvPlan& plan, const void* w, const void* dy, void* dx, cudaStream_t stream, int device);
// dw = the gradient w.r.t. w (summed over the batch)
void conv_backward_filter(const ConvPlan& plan, const void* x, const void* dy, void* dw, cudaStream_t stream,
                          int device);

#if defined(TESSERA_CUDA)
// Builds the real cuDNN descriptors of the plan (no GPU needed) and returns cuDNN's own output
// dims [N, K, P, Q]; throws with cuDNN's status when a descriptor is refused.
std::array<int, 4> cudnn_output_dims(const ConvPlan& plan);
// cuDNN's answer to creating a handle here ("CUDNN_STATUS_SUCCESS", or why not).
std::string cudnn_handle_status();
#endif

}  // namespace tessera::cuda
