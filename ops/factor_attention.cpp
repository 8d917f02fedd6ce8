// factor_attention (ops/factor_attention.h): argument checks, dispatch to
// ops/kernels/factor_attention.h, and the gradient. With p = softmax(k) over the tokens (CoaT Eq. 3),
// ctx = pᵀ·v and y = scale·q·ctx + pad(q_img ⊙ cv) per (sample, head) (Eq. 12):
//   gq = scale·g·ctxᵀ + pad(g_img ⊙ cv),  gcv = g_img ⊙ q_img,  gctx = scale·qᵀ·g,
//   gv = p·gctx,  gk = p ⊙ (v·gctxᵀ − dot),  dot_i = Σ_n p_ni·(v·gctxᵀ)_ni = Σ_c ctx_ic·gctx_ic
// (softmax's backward, its row term taken from the d×d matrices instead of a pass over the tokens);
// q's, k's and v's gradients written into one gradient of the qkv projection, in its layout.
#include "tessera/ops/factor_attention.h"

#include <cmath>

#include "tessera/autograd/flop_counter.h"
#include "tessera/autograd/function.h"
#include "tessera/ops/fused_common.h"
#include "tessera/ops/kernels/registry.h"
#include "tessera/ops/trace.h"

namespace tessera {

Tensor factor_attention(const Tensor& qkv, const Tensor& cv, int64_t num_heads, double scale) {
  // The op's id, and its name for messages and saved tensors (constant: the backward closure reads
  // them without capturing). Function-local, so unity builds see no two files' constants at once.
  constexpr OpId kOp = OpId::factor_attention;
  constexpr const char* op = op_name(kOp);
  TraceScope trace;
  check_same(qkv, cv, op, "qkv", "cv");
  TS_CHECK(is_floating(qkv.dtype()), op, ": expected floating tensors, got ", describe(qkv));
  TS_CHECK(num_heads > 0, op, ": num_heads must be > 0, got ", num_heads);
  TS_CHECK(qkv.dim() == 3 && qkv.size(1) >= 1 && qkv.size(2) > 0 && qkv.size(2) % (3 * num_heads) == 0, op,
           ": expected qkv [B, N, 3·h·d] with N >= 1 (the CLS token first) and h = ", num_heads,
           " heads of d >= 1 channels, got ", qkv.shape());
  const int64_t B = qkv.size(0), N = qkv.size(1), h = num_heads, d = qkv.size(2) / (3 * h);
  TS_CHECK((cv.shape() == Shape{B, h, N - 1, d}), op, ": expected cv [", B, ", ", h, ", ", N - 1, ", ", d,
           "] (the image tokens of qkv ", qkv.shape(), "), got ", cv.shape());
  TS_CHECK(std::isfinite(scale), op, ": scale must be finite, got ", scale);
  const Tensor x = unit_channels(qkv);
  Tensor y = Tensor::empty({B, N, h * d}, x.dtype(), x.device());
  Tensor ctx = Tensor::empty({B * h, d, d}, x.dtype(), x.device());
  Tensor lse = Tensor::empty({B * h, d}, accumulate_dtype(x.dtype()), x.device());
  const auto heads = [h, d](const Tensor& tokens, int64_t parts, int64_t p) {
    return head_part(tokens, parts, p, h, d);
  };
  if (y.numel() > 0)
    factor_attention_kernel[x.device()](heads(x, 3, 0), heads(x, 3, 1), heads(x, 3, 2), cv.detach(), scale, ctx, lse,
                                        heads(y, 1, 0));
  FlopCounter::add(2 * B * h * N * d * d);  // softmax(k)ᵀ·v and q·ctx, the composition's two products
  if (autograd::needs_grad({qkv, cv}))
    autograd::record("FactorAttentionBackward", {qkv, cv}, y,
                     [sx = SavedTensor(x), scv = SavedTensor(cv.detach()), sctx = SavedTensor(ctx),
                      slse = SavedTensor(lse), heads, scale](const Tensor& g, const GradMask& needs) {
                       const Tensor xv = sx.unpack(op), cvv = scv.unpack(op);
                       const int64_t B = cvv.size(0), h = cvv.size(1), N = xv.size(1), d = cvv.size(3);
                       NoGradGuard no_grad;
                       const Tensor gy = unit_channels(g);
                       Tensor gx = Tensor::empty(xv.shape(), xv.dtype(), xv.device());
                       Tensor gcv = Tensor::empty(cvv.shape(), cvv.dtype(), cvv.device());
                       if (gx.numel() > 0)
                         factor_attention_backward_kernel[xv.device()](
                             heads(gy, 1, 0), heads(xv, 3, 0), heads(xv, 3, 1), heads(xv, 3, 2), cvv, sctx.unpack(op),
                             slse.unpack(op), scale, heads(gx, 3, 0), heads(gx, 3, 1), heads(gx, 3, 2), gcv);
                       FlopCounter::add(4 * B * h * N * d * d);  // the gradients' four products
                       return std::vector<Tensor>{needs[0] ? gx : Tensor(), needs[1] ? gcv : Tensor()};
                     });
  if (trace.outermost()) trace.record(kOp, {qkv, cv}, {y}, {{"heads", h}, {"scale", scale}});
  return y;
}

}  // namespace tessera
