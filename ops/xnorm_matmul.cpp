// xnorm_matmul (ops/xnorm_matmul.h): argument checks, dispatch to ops/kernels/xnorm_matmul.h, and the gradient.
//   y = (gamma/q̄)·p, p = q·ctx, q̄ = max(‖q‖, eps): with the kernel's row terms R = Σ_c g·p/q̄:
//     gp = (gamma/q̄)·g,  gq̄ = −gamma·R/q̄,  ggamma = Σ_{b,n} R,  gq = gp·ctxᵀ + [‖q‖ ≥ eps]·gq̄·q/‖q‖,
//     gctx = qᵀ·gp
#include "tessera/ops/xnorm_matmul.h"

#include <cmath>

#include "tessera/autograd/function.h"
#include "tessera/ops/fused_common.h"
#include "tessera/ops/kernels/registry.h"
#include "tessera/ops/linalg.h"
#include "tessera/ops/reduce.h"
#include "tessera/ops/trace.h"

namespace tessera {

Tensor xnorm_matmul(const Tensor& q, const Tensor& ctx, const Tensor& gamma, double eps) {
  // The op's id, and its name for messages and saved tensors (constant: the backward closure reads
  // them without capturing). Function-local, so unity builds see no two files' constants at once.
  constexpr OpId kOp = OpId::xnorm_matmul;
  constexpr const char* op = op_name(kOp);
  TraceScope trace;
  check_same(q, ctx, op, "q", "ctx");
  check_parameter(q, gamma, op, "gamma");
  TS_CHECK(is_floating(q.dtype()), op, ": expected floating tensors, got ", describe(q));
  TS_CHECK(q.dim() == 4 && ctx.dim() == 4 && ctx.size(0) == q.size(0) && ctx.size(1) == q.size(1) &&
               ctx.size(2) == q.size(3),
           op, ": expected q [B, h, N, d] and ctx [B, h, d, e], got ", q.shape(), " and ", ctx.shape());
  const int64_t B = q.size(0), h = q.size(1), N = q.size(2), e = ctx.size(3);
  TS_CHECK((gamma.shape() == Shape{h, 1, 1}), op, ": expected gamma [", h, ", 1, 1] for q ", q.shape(), ", got ",
           gamma.shape());
  TS_CHECK(eps > 0.0 && std::isfinite(eps), op, ": eps must be finite and > 0, got ", eps);
  Tensor p, nq;
  const Tensor gv = gamma.detach().reshape({h}).contiguous();
  Tensor y = Tensor::empty({B, N, h, e}, q.dtype(), q.device()).transpose(1, 2);
  {
    NoGradGuard no_grad;
    nq = norm(q.detach(), {-1}).contiguous();           // [B, h, N]
    p = matmul(q.detach(), ctx.detach()).contiguous();  // [B, h, N, e]
    if (p.numel() > 0) xnorm_matmul_kernel[q.device()](p, nq, gv, eps, y);
  }
  if (autograd::needs_grad({q, ctx, gamma}))
    autograd::record("XnormMatmulBackward", {q, ctx, gamma}, y,
                     [sq = SavedTensor(q), sc = SavedTensor(ctx), sp = SavedTensor(p), snq = SavedTensor(nq),
                      sg = SavedTensor(gv), eps](const Tensor& g, const GradMask& needs) {
                       const Tensor qv = sq.unpack(op), cv = sc.unpack(op), pv = sp.unpack(op), nqv = snq.unpack(op);
                       const Tensor gamma_h = sg.unpack(op);
                       NoGradGuard no_grad;
                       Tensor gp = Tensor::empty(pv.shape(), pv.dtype(), pv.device());
                       Tensor rows = Tensor::empty(nqv.shape(), nqv.dtype(), nqv.device());
                       if (pv.numel() > 0)
                         xnorm_matmul_backward_kernel[pv.device()](g, pv, nqv, gamma_h, eps, gp, rows);
                       else rows.zero_();
                       // over [B, h, N], in the activations' dtype
                       const Tensor gamma3 = gamma_h.view({gamma_h.size(0), 1}).to(rows.dtype());
                       Tensor gq, gctx, ggamma;
                       if (needs[0])
                         gq = matmul(gp, cv.transpose(-2, -1)) + grad_through_norm(gamma3 * rows, nqv, qv, eps);
                       if (needs[1]) gctx = matmul(qv.transpose(-2, -1), gp);
                       if (needs[2]) ggamma = sum(rows, {0, 2}).view({gamma_h.size(0), 1, 1}).to(gamma_h.dtype());
                       return std::vector<Tensor>{gq, gctx, ggamma};
                     });
  if (trace.outermost()) trace.record(kOp, {q, ctx, gamma}, {y}, {{"eps", eps}});
  return y;
}

}  // namespace tessera
