// The speed levers: every run-time switch that changes how a step runs (and, where noted, its
// rounding) without changing what it computes, in one table, so that one lent GPU can measure each
// against the others (docs/cuda.md, "Levers"). Each is read once from its environment variable:
// "0" turns a lever that is on by default off, "1" turns one that is off by default on. Tests flip
// them for a scope with ScopedLever.
#pragma once
#include <vector>

namespace tessera {

// X(field, environment variable, default, what it changes)
#define TESSERA_LEVERS(X)                                                                                             \
  X(algorithm_cache, "TESSERA_CUDA_ALGO_CACHE", true,                                                                 \
    "cuBLASLt's and cuDNN's choices (and descriptors) kept per shape; off: asked on every call")                      \
  X(cast_ahead, "TESSERA_AMP_CAST_AHEAD", true,                                                                       \
    "under autocast, the weights a forward pass rounds cast together on entry (one launch each way)")                 \
  X(synchronous_launches, "TESSERA_CUDA_SYNC", false,                                                                 \
    "wait after every kernel launch, so a fault names its kernel (debugging, slow)")                                  \
  X(gemm_batch_copy, "TESSERA_GEMM_BATCH_COPY", true,                                                                 \
    "an operand whose batch dims do not merge is copied so the product is one call; off: a call per index")           \
  X(memory_order_walks, "TESSERA_MEMORY_ORDER_WALKS", true,                                                           \
    "strided kernels walk the output's memory order (permuted dense operands merge to one dim)")                      \
  X(split_backward, "TESSERA_SPLIT_BACKWARD", true,                                                                   \
    "a split into views (q, k, v of qkv) has one backward writing all gradients into one buffer")                     \
  X(accumulate_in_place, "TESSERA_ACCUMULATE_IN_PLACE", true,                                                         \
    "the backward adds a gradient into a buffer it alone owns, instead of into a new tensor")                         \
  X(gradient_sinks, "TESSERA_GRADIENT_SINKS", true,                                                                   \
    "with accumulate_in_place: a layer norm or slice backward adds its gradient into that buffer itself (no sum "     \
    "pass)")                                                                                                          \
  X(split_reductions, "TESSERA_SPLIT_REDUCTIONS", true,                                                               \
    "a reduction to few outputs (a bias gradient) split over many blocks, then combined in a fixed order")            \
  X(warp_rows, "TESSERA_WARP_ROWS", true,                                                                             \
    "softmax and layer norm rows of <= 1,024 values: a warp per row, in registers; off: a block per row")             \
  X(depthwise_any_layout, "TESSERA_DEPTHWISE_ANY_LAYOUT", true,                                                       \
    "depthwise convolutions read token maps as they lie, by our own kernels; off: NCHW copies, cuDNN")                \
  X(shared_opt_in, "TESSERA_SHARED_OPT_IN", true,                                                                     \
    "kernels tiled in shared memory (talking heads) size their tiles to the device's opt-in limit; off: 48 KB")       \
  X(depthwise_cudnn_nhwc, "TESSERA_DEPTHWISE_CUDNN_NHWC", false,                                                      \
    "depthwise convolutions of channels-last maps by cuDNN's NHWC kernels, no copy (over the any-layout lever)")      \
  X(fused_depthwise_gelu, "TESSERA_FUSED_DEPTHWISE_GELU", true,                                                       \
    "XCiT's LPI: its first depthwise convolution and GELU as one op, GELU's input recomputed; off: the composed ops") \
  X(fused_xca, "TESSERA_FUSED_XCA", true,                                                                             \
    "XCiT's attention as one op (norms, map, softmax, ·v, token layout) forward and backward; off: the composed ops") \
  X(fused_talking_heads, "TESSERA_FUSED_TALKING_HEADS", true,                                                         \
    "CaiT's talking-heads attention as one op, no N×N map in memory; off: the composed ops")                          \
  X(fused_factor_attention, "TESSERA_FUSED_FACTOR_ATTENTION", true,                                                   \
    "CoaT's factorized attention as one op from qkv (softmax over tokens, kᵀv, q·kv); off: the composed ops")         \
  X(bias_grad_epilogue, "TESSERA_BIAS_GRAD_EPILOGUE", true,                                                           \
    "a linear layer's bias gradient summed by its weight-gradient GEMM (cuBLASLt's BGRADB); off: a reduction")        \
  X(gemm_row_panels, "TESSERA_GEMM_ROW_PANELS", true,                                                                 \
    "on the CPU, a linear layer's (and linear_gelu's) GEMM in row panels, each given its bias (and GELU) while in "   \
    "cache; off: a pass before or after")                                                                             \
  X(cpu_bf16_native, "TESSERA_CPU_BF16_NATIVE", true,                                                                 \
    "on a CPU with bfloat16 instructions (AVX-512 BF16, AMX), bfloat16 conversions and GEMMs use them; off: the "     \
    "portable path a CPU without them runs (the same conversions, GEMMs on float32 copies)")

struct Levers {
#define TS_LEVER_FIELD(field, variable, on, what) bool field = on;
  TESSERA_LEVERS(TS_LEVER_FIELD)
#undef TS_LEVER_FIELD
};

// The levers, read from the environment on first use.
Levers& levers();

// The table's rows, for listings and for flipping a lever by its variable's name (tessera bench
// --lever-sweep).
struct LeverInfo {
  const char* variable;
  bool on_by_default;
  const char* what;
  bool Levers::*field;
};
const std::vector<LeverInfo>& lever_table();

// Sets one lever for the scope and restores it after (tests).
class ScopedLever {
 public:
  ScopedLever(bool Levers::*lever, bool on) : lever_(lever), previous_(levers().*lever) { levers().*lever = on; }
  ~ScopedLever() { levers().*lever_ = previous_; }
  ScopedLever(const ScopedLever&) = delete;
  ScopedLever& operator=(const ScopedLever&) = delete;

 private:
  bool Levers::*lever_;
  bool previous_;
};

}  // namespace tessera
