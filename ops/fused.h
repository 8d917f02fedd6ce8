// Fused ops: sequences of ops that the models run at every block, done in fewer passes over memory
// (the cost of a transformer block outside its GEMMs is the bytes its element-wise steps move).
// Each equals its unfused composition up to rounding (tests/test_fused.cpp checks both, and the
// float64 gradients), runs on every device, and records one backward node.
// Each fused op F is a family of its own (docs/architecture.md): ops/F.h declares it, ops/F.cpp
// checks its arguments, dispatches and holds its gradient, ops/kernels/F.h, ops/cpu/F.cpp and
// cuda/kernels/F.cu hold its kernels. What several of them share is written once per layer:
// ops/fused_common.h, ops/kernels/strides4.h, ops/cpu/rows.h and cuda/head_shape.h. This header
// includes the ten ops.
#pragma once
#include "tessera/ops/class_attention.h"
#include "tessera/ops/depthwise_conv2d_gelu.h"
#include "tessera/ops/factor_attention.h"
#include "tessera/ops/factor_attention_merge.h"
#include "tessera/ops/layer_scale_residual.h"
#include "tessera/ops/linear_gelu.h"
#include "tessera/ops/talking_heads_attention.h"
#include "tessera/ops/xca_attention.h"
#include "tessera/ops/xca_attention_map.h"
#include "tessera/ops/xnorm_matmul.h"
