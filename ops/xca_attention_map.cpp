// xca_attention_map (ops/xca_attention_map.h): argument checks, dispatch to
// ops/kernels/xca_attention_map.h, and the gradient.
//   a = softmax(t·S/(q̄ k̄ᵀ)), S = q·kᵀ, q̄ = max(‖q_i‖, eps), k̄ likewise: with gz the gradient at the
//   softmax's input and the kernel's row/column terms R_i = Σ_j gz·S/(q̄k̄), C_j = Σ_i gz·S/(q̄k̄):
//     gS = gz·t/(q̄ k̄ᵀ),  gq̄_i = −t·R_i/q̄_i,  gk̄_j = −t·C_j/k̄_j,  gt = Σ_{b,i} R_i
//     gq = gS·k + [‖q_i‖ ≥ eps]·gq̄_i·q_i/‖q_i‖,  gk = gSᵀ·q + [‖k_j‖ ≥ eps]·gk̄_j·k_j/‖k_j‖
//   where gq̄_i/‖q_i‖ = −t·R_i/q̄_i² (‖q_i‖ = q̄_i where the mask is 1): the kernel's q_coef.
#include "tessera/ops/xca_attention_map.h"

#include <cmath>

#include "tessera/autograd/function.h"
#include "tessera/ops/fused_common.h"
#include "tessera/ops/kernels/linalg.h"
#include "tessera/ops/kernels/registry.h"
#include "tessera/ops/linalg.h"
#include "tessera/ops/reduce.h"
#include "tessera/ops/trace.h"

namespace tessera {

Tensor xca_attention_map(const Tensor& q, const Tensor& k, const Tensor& temperature, double eps) {
  // The op's id, and its name for messages and saved tensors (constant: the backward closure reads
  // them without capturing). Function-local, so unity builds see no two files' constants at once.
  constexpr OpId kOp = OpId::xca_attention_map;
  constexpr const char* op = op_name(kOp);
  TraceScope trace;
  check_same(q, k, op, "q", "k");
  check_parameter(q, temperature, op, "temperature");
  TS_CHECK(is_floating(q.dtype()), op, ": expected floating tensors, got ", describe(q));
  TS_CHECK(q.dim() == 4 && q.shape() == k.shape(), op, ": expected q and k of one shape [B, h, d, N], got ", q.shape(),
           " and ", k.shape());
  const int64_t B = q.size(0), h = q.size(1), d = q.size(2);
  TS_CHECK((temperature.shape() == Shape{h, 1, 1}), op, ": expected temperature [", h, ", 1, 1] for q ", q.shape(),
           ", got ", temperature.shape());
  TS_CHECK(eps > 0.0 && std::isfinite(eps), op, ": eps must be finite and > 0, got ", eps);
  Tensor s, nq, nk, a;
  const Tensor t = temperature.detach().reshape({h}).contiguous();
  // On a device, q and k as its GEMMs take them: copied once where their batch dims do not merge (a
  // view of the qkv projection), and saved so, for the backward's products too.
  const Tensor qg = batch_ready(q.detach()), kg = batch_ready(k.detach());
  {
    NoGradGuard no_grad;
    // ‖q_c‖ over the tokens, read in the order the tokens lie in memory. As a view of the qkv
    // projection [B, N, 3, h, d] the tokens are the outer dim and (h, d) are contiguous, so the
    // norms are taken over dim 1 of q as [B, N, h, d] (squares over contiguous rows, then a sum of
    // rows) rather than over q's last dim, whose stride is 3·h·d (a gather: 12% of XCiT-Nano's
    // inference); a copy [B, h, d, N] has the tokens last.
    const auto token_norms = [](const Tensor& x) {
      return (x.stride(3) == 1 ? norm(x, {3}) : norm(x.permute({0, 3, 1, 2}), {1})).contiguous();  // [B, h, d]
    };
    nq = token_norms(qg);
    nk = token_norms(kg);
    s = matmul(qg, kg.transpose(-2, -1)).contiguous();  // [B, h, d, d]
    a = Tensor::empty(s.shape(), s.dtype(), s.device());
    if (a.numel() > 0)
      xca_attention_map_kernel[q.device()](s.view({B * h, d, d}), nq.view({B * h, d}), nk.view({B * h, d}), t, eps,
                                           a.view({B * h, d, d}));
  }
  if (autograd::needs_grad({q, k, temperature}))
    autograd::record(
        "XcaAttentionMapBackward", {q, k, temperature}, a,
        [sq = SavedTensor(qg), sk = SavedTensor(kg), ss = SavedTensor(s), snq = SavedTensor(nq), snk = SavedTensor(nk),
         sa = SavedTensor(a), st = SavedTensor(t), eps](const Tensor& g, const GradMask& needs) {
          const Tensor qv = sq.unpack(op), kv = sk.unpack(op), sv = ss.unpack(op);
          const Tensor nqv = snq.unpack(op), nkv = snk.unpack(op), tv = st.unpack(op);
          const int64_t B = qv.size(0), h = qv.size(1), d = qv.size(2);
          NoGradGuard no_grad;
          // A handful of launches in all (the kernel's two, a GEMM, a product and a sum for each of
          // q and k, and t's sum): composed of element-wise ops, this was some thirty per block.
          Tensor gs = Tensor::empty(sv.shape(), sv.dtype(), sv.device());
          Tensor rows = Tensor::empty(nqv.shape(), tv.dtype(), nqv.device());
          Tensor q_coef = Tensor::empty(nqv.shape(), tv.dtype(), nqv.device());
          Tensor k_coef = Tensor::empty(nkv.shape(), tv.dtype(), nkv.device());
          if (gs.numel() > 0)
            xca_attention_map_backward_kernel[sv.device()](
                g.contiguous().view({B * h, d, d}), sa.unpack(op).view({B * h, d, d}), sv.view({B * h, d, d}),
                nqv.view({B * h, d}), nkv.view({B * h, d}), tv, eps, gs.view({B * h, d, d}), rows.view({B * h, d}),
                q_coef.view({B * h, d}), k_coef.view({B * h, d}));
          else {
            rows.zero_();
            q_coef.zero_();
            k_coef.zero_();
          }
          // The coefficients multiply q and k in the activations' dtype, as the GEMM's terms.
          const auto through_norm = [](const Tensor& v, const Tensor& coef) {
            return v * coef.unsqueeze(-1).to(v.dtype());
          };
          Tensor gq, gk, gt;
          if (needs[0]) gq = matmul(gs, kv).add_(through_norm(qv, q_coef));
          if (needs[1]) gk = matmul(gs.transpose(-2, -1), qv).add_(through_norm(kv, k_coef));
          if (needs[2]) gt = sum(rows, {0, 2}).view({h, 1, 1});
          return std::vector<Tensor>{gq, gk, gt};
        });
  if (trace.outermost()) trace.record(kOp, {q, k, temperature}, {a}, {{"eps", eps}});
  return a;
}

}  // namespace tessera
