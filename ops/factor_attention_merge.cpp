// factor_attention_merge (ops/factor_attention_merge.h): argument checks, dispatch to
// ops/kernels/factor_attention_merge.h, and the gradient.
//   y = merge(scale·m + pad(q ⊙ cv)):  gm = scale·g,  gq = g ⊙ cv (0 on the CLS row),  gcv = g ⊙ q
//   (g taken back to head layout [B, h, N, d]; the kernel reads it in token layout directly)
#include "tessera/ops/factor_attention_merge.h"

#include <cmath>

#include "tessera/autograd/function.h"
#include "tessera/ops/fused_common.h"
#include "tessera/ops/kernels/registry.h"
#include "tessera/ops/trace.h"

namespace tessera {

Tensor factor_attention_merge(const Tensor& m, const Tensor& q, const Tensor& cv, double scale) {
  // The op's id, and its name for messages and saved tensors (constant: the backward closure reads
  // them without capturing). Function-local, so unity builds see no two files' constants at once.
  constexpr OpId kOp = OpId::factor_attention_merge;
  constexpr const char* op = op_name(kOp);
  TraceScope trace;
  check_same(m, q, op, "m", "q");
  check_same(m, cv, op, "m", "cv");
  TS_CHECK(is_floating(m.dtype()), op, ": expected floating tensors, got ", describe(m));
  TS_CHECK(m.dim() == 4 && q.shape() == m.shape() && m.size(2) >= 1, op,
           ": expected m and q of one shape [B, h, N, d] with N >= 1 (the CLS token first), got ", m.shape(), " and ",
           q.shape());
  const int64_t B = m.size(0), h = m.size(1), N = m.size(2), d = m.size(3);
  TS_CHECK((cv.shape() == Shape{B, h, N - 1, d}), op, ": expected cv [", B, ", ", h, ", ", N - 1, ", ", d,
           "] (the image tokens of m ", m.shape(), "), got ", cv.shape());
  TS_CHECK(std::isfinite(scale), op, ": scale must be finite, got ", scale);
  Tensor y = Tensor::empty({B, N, h * d}, m.dtype(), m.device());
  if (y.numel() > 0) factor_attention_merge_kernel[m.device()](m.detach(), q.detach(), cv.detach(), scale, y);
  if (autograd::needs_grad({m, q, cv}))
    autograd::record("FactorAttentionMergeBackward", {m, q, cv}, y,
                     [sq = SavedTensor(q), scv = SavedTensor(cv), scale](const Tensor& g, const GradMask& needs) {
                       const Tensor qv = sq.unpack(op), cvv = scv.unpack(op);
                       auto maybe = [&](bool needed, const Tensor& like) {
                         return needed ? Tensor::empty(like.shape(), like.dtype(), like.device()) : Tensor();
                       };
                       Tensor gm = maybe(needs[0], qv), gq = maybe(needs[1], qv), gcv = maybe(needs[2], cvv);
                       if (g.numel() > 0)
                         factor_attention_merge_backward_kernel[qv.device()](g.contiguous(), qv, cvv, scale, gm, gq,
                                                                             gcv);
                       return std::vector<Tensor>{gm, gq, gcv};
                     });
  if (trace.outermost()) trace.record(kOp, {m, q, cv}, {y}, {{"scale", scale}});
  return y;
}

}  // namespace tessera
