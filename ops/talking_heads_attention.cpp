// talking_heads_attention (ops/talking_heads_attention.h): argument checks, dispatch to
// ops/kernels/talking_heads_attention.h, and the gradient. With dA_g = dO_g·v_gᵀ (the gradient of
// out = A·v per mixed head g), the chain back through the two mixings and the softmax is
//   dP_o = Σ_g w_w[g, o]·dA_g,   dL_o = P_o ⊙ (dP_o − rowsum(dP_o ⊙ P_o)),   dS_h = Σ_o w_l[o, h]·dL_o,
//   dq_h = scale·dS_h·k_h,  dk_h = scale·dS_hᵀ·q_h,  dv_g = A_gᵀ·dO_g,
//   dw_w[g, o] = Σ dA_g ⊙ P_o,  db_w[g] = Σ dA_g,  dw_l[o, h] = Σ dL_o ⊙ S_h
// (sums over every sample, query and key); the kernels recompute S, P and A rather than keep them.
// db_l = Σ dL_o is zero: each row of dL sums to 0 (the softmax is blind to a shift of its row, and
// b_l shifts every row of L_o by b_l[o]), so the kernels leave b_l out and its gradient is zeros
// (the composition's is rounding noise around them).
#include "tessera/ops/talking_heads_attention.h"

#include <cmath>

#include "tessera/autograd/flop_counter.h"
#include "tessera/autograd/function.h"
#include "tessera/core/backend.h"
#include "tessera/ops/creation.h"
#include "tessera/ops/fused_common.h"
#include "tessera/ops/indexing.h"
#include "tessera/ops/kernels/registry.h"
#include "tessera/ops/linalg.h"
#include "tessera/ops/softmax.h"
#include "tessera/ops/trace.h"

namespace tessera {

namespace {

// The composition the op stands for, for shapes the CUDA kernels' tiles do not take: the same
// products as nn/talking_heads.cpp's unfused path (each mixing one product w·maps per sample).
Tensor composed(const Tensor& qkv, int64_t h, double scale, const Tensor& w_l, const Tensor& b_l, const Tensor& w_w,
                const Tensor& b_w) {
  const int64_t B = qkv.size(0), N = qkv.size(1), C = qkv.size(2) / 3;
  const std::vector<Tensor> parts = unbind(qkv.reshape({B, N, 3, h, C / h}).permute({2, 0, 3, 1, 4}), 0);
  auto mix = [&](const Tensor& w, const Tensor& bias, const Tensor& maps) {
    Tensor mixed = matmul(w.to(qkv.dtype()), maps.reshape({B, h, N * N}));
    if (bias.defined()) mixed = mixed + bias.to(qkv.dtype()).view({h, 1});
    return mixed.view({B, h, N, N});
  };
  const Tensor scores = matmul(parts[0] * scale, parts[1].transpose(-2, -1));
  const Tensor attn = mix(w_w, b_w, softmax(mix(w_l, b_l, scores), -1));
  return matmul(attn, parts[2]).transpose(1, 2).reshape({B, N, C});
}

}  // namespace

Tensor talking_heads_attention(const Tensor& qkv, int64_t num_heads, double scale, const Tensor& w_l, const Tensor& b_l,
                               const Tensor& w_w, const Tensor& b_w) {
  constexpr OpId kOp = OpId::talking_heads_attention;
  constexpr const char* op = op_name(kOp);
  TraceScope trace;
  TS_CHECK(qkv.defined() && is_floating(qkv.dtype()), op, ": expected floating qkv, got ",
           qkv.defined() ? describe(qkv) : std::string("an undefined tensor"));
  TS_CHECK(qkv.dim() == 3 && qkv.size(1) >= 1 && qkv.size(2) % 3 == 0, op,
           ": expected qkv [B, N, 3·C] with N >= 1, got ", qkv.shape());
  const int64_t B = qkv.size(0), N = qkv.size(1), C = qkv.size(2) / 3, h = num_heads;
  TS_CHECK(h >= 1 && C % h == 0, op, ": C = ", C, " (qkv ", qkv.shape(), ") is not divisible by num_heads ", h);
  TS_CHECK(std::isfinite(scale), op, ": scale must be finite, got ", scale);
  const Shape square{h, h}, vector{h};
  for (const auto& [w, name] : {std::pair{w_l, "w_l"}, std::pair{w_w, "w_w"}}) {
    check_parameter(qkv, w, op, name);
    TS_CHECK(w.shape() == square, op, ": expected ", name, " [", h, ", ", h, "] (num_heads ", h, "), got ", w.shape());
  }
  for (const auto& [b, name] : {std::pair{b_l, "b_l"}, std::pair{b_w, "b_w"}})
    if (b.defined()) {
      check_parameter(qkv, b, op, name);
      TS_CHECK(b.shape() == vector, op, ": expected ", name, " [", h, "] (num_heads ", h, "), got ", b.shape());
    }
  const DType acc = accumulate_dtype(qkv.dtype());
  Tensor out;
  if (qkv.device().is_cuda() && !talking_heads_fit_device(h, N, C, static_cast<int64_t>(dtype_size(acc)),
                                                          static_cast<int64_t>(block_shared_memory(qkv.device())))) {
    out = composed(qkv, h, scale, w_l, b_l, w_w, b_w);
  } else {
    out = Tensor::empty({B, N, C}, qkv.dtype(), qkv.device());
    const Tensor lse = Tensor::empty({B, h, N}, acc, qkv.device());
    const Tensor x = unit_channels(qkv), wl = contiguous_or_undefined(w_l), ww = contiguous_or_undefined(w_w),
                 bw = contiguous_or_undefined(b_w);
    if (B > 0) talking_heads_attention_kernel[qkv.device()](x, scale, wl, ww, bw, out, lse);
    // The composition's products: q·kᵀ and A·v (dh per map value each), the two mixings (h each).
    FlopCounter::add(2 * B * h * N * N * (C / h + h));
    if (autograd::needs_grad({qkv, w_l, b_l, w_w, b_w}))
      autograd::record("TalkingHeadsAttentionBackward", {qkv, w_l, b_l, w_w, b_w}, out,
                       [sx = SavedTensor(x), swl = SavedTensor(wl), sww = SavedTensor(ww), sbw = SavedTensor(bw),
                        slse = SavedTensor(lse), scale, with_b_l = b_l.defined()](const Tensor& g, const GradMask&) {
                         const Tensor xv = sx.unpack(op), wlv = swl.unpack(op), wwv = sww.unpack(op);
                         const Tensor bwv = sbw.defined() ? sbw.unpack(op) : Tensor();
                         const int64_t heads = wlv.size(0), hh = heads * heads;
                         const Tensor gx = Tensor::empty(xv.shape(), xv.dtype(), xv.device());
                         // One buffer for the gradients of w_l, w_w and b_w.
                         Tensor gp = Tensor::empty({2 * hh + heads}, wlv.dtype(), wlv.device());
                         if (xv.size(0) > 0)
                           talking_heads_attention_backward_kernel[xv.device()](unit_channels(g), xv, scale, wlv, wwv,
                                                                                bwv, slse.unpack(op), gx, gp);
                         else gp.zero_();
                         return std::vector<Tensor>{gx, gp.narrow(0, 0, hh).view({heads, heads}),
                                                    with_b_l ? zeros({heads}, wlv.dtype(), wlv.device()) : Tensor(),
                                                    gp.narrow(0, hh, hh).view({heads, heads}),
                                                    bwv.defined() ? gp.narrow(0, 2 * hh, heads) : Tensor()};
                       });
  }
  if (trace.outermost()) trace.record(kOp, {qkv, w_l, b_l, w_w, b_w}, {out}, {{"num_heads", h}, {"scale", scale}});
  return out;
}

}  // namespace tessera
