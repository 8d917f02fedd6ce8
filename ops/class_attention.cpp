// class_attention (ops/class_attention.h): argument checks, dispatch to
// ops/kernels/class_attention.h, and the gradient.
//   y = softmax(scale·q·kᵀ)·v (one query): with ga = g·vᵀ and gz = a ⊙ (ga − Σ a·ga):
//     gq = scale·gz·k,  gk = scale·gzᵀ·q,  gv = aᵀ·g
#include "tessera/ops/class_attention.h"

#include <cmath>

#include "tessera/autograd/flop_counter.h"
#include "tessera/autograd/function.h"
#include "tessera/ops/fused_common.h"
#include "tessera/ops/kernels/registry.h"
#include "tessera/ops/trace.h"

namespace tessera {

Tensor class_attention(const Tensor& q, const Tensor& k, const Tensor& v, double scale, Tensor* weights) {
  // The op's id, and its name for messages and saved tensors (constant: the backward closure reads
  // them without capturing). Function-local, so unity builds see no two files' constants at once.
  constexpr OpId kOp = OpId::class_attention;
  constexpr const char* op = op_name(kOp);
  TraceScope trace;
  check_same(q, k, op, "q", "k");
  check_same(q, v, op, "q", "v");
  TS_CHECK(is_floating(q.dtype()), op, ": expected floating tensors, got ", describe(q));
  TS_CHECK(k.dim() == 4 && k.size(2) >= 1 && v.shape() == k.shape(), op,
           ": expected k and v of one shape [B, h, N, d] with N >= 1, got ", k.shape(), " and ", v.shape());
  const int64_t B = k.size(0), h = k.size(1), N = k.size(2), d = k.size(3);
  TS_CHECK((q.shape() == Shape{B, h, 1, d}), op, ": expected q [", B, ", ", h, ", 1, ", d,
           "] (one query per head of k ", k.shape(), "), got ", q.shape());
  TS_CHECK(std::isfinite(scale), op, ": scale must be finite, got ", scale);
  Tensor a = Tensor::empty({B, h, 1, N}, q.dtype(), q.device());
  Tensor y = Tensor::empty({B, h, 1, d}, q.dtype(), q.device());
  // Unit stride along d (the projections' slices have it; a transposed view gets copied), so each
  // (sample, head) slice is a row-major matrix with an outer stride for the kernels.
  auto unit_inner = [](const Tensor& t) {
    return t.size(3) <= 1 || t.stride(3) == 1 ? t.detach() : t.detach().contiguous();
  };
  const Tensor kc = unit_inner(k), vc = unit_inner(v);
  if (a.numel() > 0) class_attention_kernel[q.device()](q.detach(), kc, vc, scale, a, y);
  FlopCounter::add(2 * B * h * N * d);
  if (weights) *weights = a;
  if (autograd::needs_grad({q, k, v}))
    autograd::record("ClassAttentionBackward", {q, k, v}, y,
                     [sq = SavedTensor(q), sk = SavedTensor(kc), sv = SavedTensor(vc), sa = SavedTensor(a), scale](
                         const Tensor& g, const GradMask& needs) {
                       const Tensor qv = sq.unpack(op), kv = sk.unpack(op), vv = sv.unpack(op);
                       // k's and v's gradients in token layout [B, N, h, d], the layout of the
                       // projections they came from, so the heads' merge back copies nothing.
                       auto token_layout = [&](bool needed) {
                         if (!needed) return Tensor();
                         return Tensor::empty({kv.size(0), kv.size(2), kv.size(1), kv.size(3)}, kv.dtype(), kv.device())
                             .transpose(1, 2);
                       };
                       Tensor gq = needs[0] ? Tensor::empty(qv.shape(), qv.dtype(), qv.device()) : Tensor();
                       Tensor gk = token_layout(needs[1]), gv = token_layout(needs[2]);
                       if (qv.numel() + kv.numel() > 0)
                         class_attention_backward_kernel[kv.device()](g, qv, kv, vv, sa.unpack(op), scale, gq, gk, gv);
                       return std::vector<Tensor>{gq, gk, gv};
                     });
  if (trace.outermost()) trace.record(kOp, {q, k, v}, {y}, {{"scale", scale}});
  return y;
}

}  // namespace tessera
