// Kernel interface of talking_heads_attention (internal; ops/talking_heads_attention.h says what it
// computes), and the tile sizes of its CUDA kernels, which the front end also reads: where even one
// query row's maps do not fit a block's shared memory it runs the composition instead.
#pragma once
#include <algorithm>
#include <cstdint>

#include "tessera/core/dispatch.h"
#include "tessera/core/tensor.h"

namespace tessera {

// qkv [B, N, 3·C] with unit stride along the channels, any other strides (channel s·C + h·dh + c:
// part s of q, k, v, head h, as timm's qkv Linear); w_l, w_w [h, h] and b_w [h] (undefined: zero)
// contiguous, in qkv's accumulation dtype. b_l is no operand: it adds b_l[o] to every logit of each
// softmax row of head o, which the softmax ignores, so it changes neither the output nor any other
// gradient, and its own gradient is zero. Writes out [B, N, C] contiguous,
// out[b, i, g·dh + c] = Σ_j A_g[i, j]·v_g[j, c] with A = mix_w(softmax(mix_l(scale·q·kᵀ))), and lse
// [B, h, N] contiguous in the accumulation dtype: the log-sum-exp of each softmax row, from which the
// backward recomputes the weights.
using TalkingHeadsAttentionKernel = void(const Tensor& qkv, double scale, const Tensor& w_l, const Tensor& w_w,
                                         const Tensor& b_w, const Tensor& out, const Tensor& lse);
// From g [B, N, C] (unit stride along the channels) and the forward's lse: gqkv [B, N, 3·C]
// contiguous (q's, k's and v's gradients in qkv's layout) and gparams [2·h² + h] contiguous in the
// accumulation dtype: the gradients of w_l, w_w and b_w in that order (b_w's slot is written even
// where it is undefined).
using TalkingHeadsAttentionBackwardKernel = void(const Tensor& g, const Tensor& qkv, double scale, const Tensor& w_l,
                                                 const Tensor& w_w, const Tensor& b_w, const Tensor& lse,
                                                 const Tensor& gqkv, const Tensor& gparams);

// ---- the CUDA kernels' tiles -------------------------------------------------------------------------
// A block holds all heads' maps of its tile in shared memory, within `shared_bytes` (what a block may
// use on the device: block_shared_memory, core/backend.h — 227 KB on an H100 or H200, whose kernels
// opt in beyond the 48 KB every kernel has), beside the parameters (2·h² + h values); one thread
// mixes the h heads of one (query, key) pair in registers, so at most kMaxHeads heads (CaiT has 4 to
// 16).
struct TalkingHeadsTiles {
  int64_t rows;       // forward: query rows per block (T·h·N map values)
  int64_t grad_rows;  // backward's query pass: rows per block (two maps of T·h·N, and D [T, h])
  int64_t keys;       // backward's key pass: keys per block and queries per step (dk, dv [keys, C]; two
                      // maps of keys·h·keys)
};
inline constexpr int64_t kTalkingHeadsMaxHeads = 16;
inline constexpr int64_t kTalkingHeadsMaxTile = 16;

// The tiles for h heads of N tokens and C channels, values of `value_bytes` (the accumulation
// dtype's), in `shared_bytes` per block; a tile of 0 where even one row does not fit.
inline TalkingHeadsTiles talking_heads_tiles(int64_t h, int64_t N, int64_t C, int64_t value_bytes,
                                             int64_t shared_bytes) {
  const int64_t budget = shared_bytes / value_bytes - (2 * h * h + h);
  auto clamp = [](int64_t t) { return std::clamp<int64_t>(t, 0, kTalkingHeadsMaxTile); };
  int64_t keys = kTalkingHeadsMaxTile;
  while (keys > 0 && 2 * keys * C + 2 * keys * h * keys > budget) keys /= 2;
  return {clamp(budget / (h * N)), clamp(budget / (2 * h * N + h)), keys};
}

// Whether the CUDA kernels take these shapes.
inline bool talking_heads_fit_device(int64_t h, int64_t N, int64_t C, int64_t value_bytes, int64_t shared_bytes) {
  const TalkingHeadsTiles t = talking_heads_tiles(h, N, C, value_bytes, shared_bytes);
  return h <= kTalkingHeadsMaxHeads && t.rows > 0 && t.grad_rows > 0 && t.keys > 0;
}

}  // namespace tessera
