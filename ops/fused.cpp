// Fused ops (ops/fused.h): argument checks, dispatch to ops/kernels/fused.h, and the gradients.
//   y = x + s·gamma·f:   gx = g,  gf = g·s·gamma,  ggamma = Σ_rows g·s·f   (s a constant)
//   y = gelu(x·Wᵀ + b):  with h = x·Wᵀ + b and gh = g·gelu'(h):  gx = gh·W,  gW = ghᵀ·x,  gb = Σ_rows gh
//   a = softmax(t·S/(q̄ k̄ᵀ)), S = q·kᵀ, q̄ = max(‖q_i‖, eps), k̄ likewise: with gz the gradient at the
//   softmax's input and the kernel's row/column terms R_i = Σ_j gz·S/(q̄k̄), C_j = Σ_i gz·S/(q̄k̄):
//     gS = gz·t/(q̄ k̄ᵀ),  gq̄_i = −t·R_i/q̄_i,  gk̄_j = −t·C_j/k̄_j,  gt = Σ_{b,i} R_i
//     gq = gS·k + [‖q_i‖ ≥ eps]·gq̄_i·q_i/‖q_i‖,  gk = gSᵀ·q + [‖k_j‖ ≥ eps]·gk̄_j·k_j/‖k_j‖
//   y = merge(scale·m + pad(q ⊙ cv)):  gm = scale·g,  gq = g ⊙ cv (0 on the CLS row),  gcv = g ⊙ q
//   (g taken back to head layout [B, h, N, d]; the kernel reads it in token layout directly)
//   y = softmax(scale·q·kᵀ)·v (one query): with ga = g·vᵀ and gz = a ⊙ (ga − Σ a·ga):
//     gq = scale·gz·k,  gk = scale·gzᵀ·q,  gv = aᵀ·g
//   y = (gamma/q̄)·p, p = q·ctx, q̄ = max(‖q‖, eps): with the kernel's row terms R = Σ_c g·p/q̄:
//     gp = (gamma/q̄)·g,  gq̄ = −gamma·R/q̄,  ggamma = Σ_{b,n} R,  gq = gp·ctxᵀ + [‖q‖ ≥ eps]·gq̄·q/‖q‖,
//     gctx = qᵀ·gp
#include "tessera/ops/fused.h"

#include <cmath>

#include "tessera/autograd/function.h"
#include "tessera/core/autocast.h"
#include "tessera/ops/creation.h"
#include "tessera/ops/elementwise.h"
#include "tessera/autograd/flop_counter.h"
#include "tessera/ops/kernels/registry.h"
#include "tessera/ops/linalg.h"
#include "tessera/ops/reduce.h"

namespace tessera {

namespace {

void check_same(const Tensor& a, const Tensor& b, const char* op, const char* a_name, const char* b_name) {
  TS_CHECK(a.defined() && b.defined(), op, ": ", a_name, " or ", b_name, " is an undefined tensor");
  TS_CHECK(a.dtype() == b.dtype() && a.device() == b.device(), op, ": ", a_name, " is ", describe(a), " but ", b_name,
           " is ", describe(b));
}

// The gradient reaching the rows of v [..., n] through their clamped norms q̄ = max(‖v‖, eps), given
// scaled_terms = −q̄·∂L/∂q̄ [...] (a kernel's row or column terms times the temperature or gamma):
// ∂L/∂q̄ · ∂‖v‖/∂v = −scaled_terms/q̄ · v/‖v‖ = −scaled_terms·v/q̄² where ‖v‖ ≥ eps, 0 where clamped.
Tensor grad_through_norm(const Tensor& scaled_terms, const Tensor& norms, const Tensor& v, double eps) {
  const Tensor clamped = clamp_min(norms, eps);
  const Tensor g_norm = where(ge(norms, scalar_like(eps, norms)), -scaled_terms / (clamped * clamped),
                              scalar_like(0.0, norms));
  return v * g_norm.unsqueeze(-1);
}

}  // namespace

Tensor layer_scale_residual(const Tensor& x, const Tensor& f, const Tensor& gamma, const Tensor& sample_scale) {
  const char* op = "layer_scale_residual";
  check_same(x, f, op, "x", "f");
  check_same(x, gamma, op, "x", "gamma");
  TS_CHECK(is_floating(x.dtype()), op, ": expected floating tensors, got ", describe(x));
  TS_CHECK(x.dim() >= 1 && x.shape() == f.shape(), op, ": x ", x.shape(), " and f ", f.shape(),
           " must have one shape of at least one dim");
  const int64_t C = x.shape().back();
  TS_CHECK(gamma.shape() == Shape{C}, op, ": expected gamma [", C, "] for x ", x.shape(), ", got ", gamma.shape());
  if (sample_scale.defined()) {
    check_same(x, sample_scale, op, "x", "sample_scale");
    TS_CHECK(x.dim() >= 2 && sample_scale.shape() == Shape{x.size(0)}, op, ": expected sample_scale [", x.size(0),
             "] (one per sample of x ", x.shape(), "), got ", sample_scale.shape());
    TS_CHECK(!(autograd::grad_enabled() && sample_scale.requires_grad()), op,
             ": sample_scale is a constant (stochastic depth's mask) and must not require grad");
  }
  const Tensor xc = x.detach().contiguous(), fc = f.detach().contiguous(), gc = gamma.detach().contiguous();
  const Tensor sc = sample_scale.defined() ? sample_scale.detach().contiguous() : Tensor();
  Tensor y = Tensor::empty(x.shape(), x.dtype(), x.device());
  if (y.numel() > 0) layer_scale_residual_kernel[x.device()](xc, fc, gc, sc, y);
  if (autograd::needs_grad({x, f, gamma}))
    autograd::record("LayerScaleResidualBackward", {x, f, gamma}, y,
                     [sf = SavedTensor(fc), sg = SavedTensor(gc), ss = SavedTensor(sc)](const Tensor& g,
                                                                                         const GradMask& needs) {
                       const Tensor fv = sf.unpack("layer_scale_residual"), gv = sg.unpack("layer_scale_residual");
                       const Tensor sv = ss.defined() ? ss.unpack("layer_scale_residual") : Tensor();
                       Tensor gf = needs[1] ? Tensor::empty(fv.shape(), fv.dtype(), fv.device()) : Tensor();
                       Tensor ggamma = needs[2] ? Tensor::empty(gv.shape(), gv.dtype(), gv.device()) : Tensor();
                       if ((gf.defined() || ggamma.defined()) && fv.numel() > 0)
                         layer_scale_residual_backward_kernel[fv.device()](g.contiguous(), fv, gv, sv, gf, ggamma);
                       else if (ggamma.defined())
                         ggamma.zero_();
                       return std::vector<Tensor>{needs[0] ? g : Tensor(), gf, ggamma};
                     });
  return y;
}

Tensor linear_gelu(const Tensor& x, const Tensor& weight, const Tensor& bias, bool approximate) {
  const char* op = "linear_gelu";
  check_same(x, weight, op, "input", "weight");
  check_same(x, bias, op, "input", "bias");
  // Under autocast the GEMM computes in the low precision (core/autocast.h): the composition.
  if (autocast_for(x, weight)) return gelu(linear(x, weight, bias), approximate);
  TS_CHECK(weight.dim() == 2 && x.dim() >= 1 && x.size(-1) == weight.size(1), op, ": input ", x.shape(),
           " does not fit weight [out_features, in_features] ", weight.shape());
  const int64_t in = weight.size(1), out_features = weight.size(0);
  TS_CHECK(bias.shape() == Shape{out_features}, op, ": expected bias [", out_features, "] for weight ", weight.shape(),
           ", got ", bias.shape());
  Shape lead(x.shape().begin(), x.shape().end() - 1);
  const int64_t rows = numel_of(lead);
  // pre = x·Wᵀ (the GEMM without its bias), then bias and GELU in one pass; pre keeps x·Wᵀ + b.
  Tensor pre = Tensor::empty({rows, out_features}, x.dtype(), x.device());
  matmul_kernel[x.device()](gemm_operand(x.detach().reshape({rows, in})), gemm_operand(weight.detach().t()), Tensor(),
                            pre);
  FlopCounter::add(rows * in * out_features);
  Tensor y = Tensor::empty(pre.shape(), x.dtype(), x.device());
  if (y.numel() > 0) linear_gelu_kernel[x.device()](pre, bias.detach().contiguous(), approximate, y);
  Shape out_shape = lead;
  out_shape.push_back(out_features);
  Tensor result = y.view(out_shape);
  if (autograd::needs_grad({x, weight, bias}))
    autograd::record("LinearGeluBackward", {x, weight, bias}, result,
                     [sx = SavedTensor(x), sw = SavedTensor(weight), sp = SavedTensor(pre), approximate, rows, in,
                      x_shape = x.shape()](const Tensor& g, const GradMask& needs) {
                       const char* name = "linear_gelu";
                       const Tensor pv = sp.unpack(name);
                       Tensor gpre = Tensor::empty(pv.shape(), pv.dtype(), pv.device());
                       Tensor gb = needs[2] ? Tensor::empty({pv.size(1)}, pv.dtype(), pv.device()) : Tensor();
                       if (pv.numel() > 0)
                         linear_gelu_backward_kernel[pv.device()](g.contiguous().view(pv.shape()), pv, approximate, gpre, gb);
                       else if (gb.defined())
                         gb.zero_();
                       Tensor gx, gw;
                       if (needs[0]) gx = matmul(gpre, sw.unpack(name)).view(x_shape);
                       if (needs[1]) gw = matmul(gpre.t(), sx.unpack(name).reshape({rows, in}));
                       return std::vector<Tensor>{gx, gw, gb};
                     });
  return result;
}

Tensor xca_attention_map(const Tensor& q, const Tensor& k, const Tensor& temperature, double eps) {
  const char* op = "xca_attention_map";
  check_same(q, k, op, "q", "k");
  check_same(q, temperature, op, "q", "temperature");
  TS_CHECK(is_floating(q.dtype()), op, ": expected floating tensors, got ", describe(q));
  TS_CHECK(q.dim() == 4 && q.shape() == k.shape(), op, ": expected q and k of one shape [B, h, d, N], got ", q.shape(),
           " and ", k.shape());
  const int64_t B = q.size(0), h = q.size(1), d = q.size(2);
  TS_CHECK((temperature.shape() == Shape{h, 1, 1}), op, ": expected temperature [", h, ", 1, 1] for q ", q.shape(),
           ", got ", temperature.shape());
  TS_CHECK(eps > 0.0 && std::isfinite(eps), op, ": eps must be finite and > 0, got ", eps);
  Tensor s, nq, nk, a;
  const Tensor t = temperature.detach().reshape({h}).contiguous();
  {
    NoGradGuard no_grad;
    // ‖q_c‖ over the tokens, read in the order the tokens lie in memory: q is a view of the qkv
    // projection [B, N, 3, h, d], in which the tokens are the outer dim and (h, d) are contiguous, so
    // the norms are taken over dim 1 of q as [B, N, h, d] (squares over contiguous rows, then a sum
    // of rows) rather than over q's last dim, whose stride is 3·h·d (a gather: 12% of XCiT-Nano's
    // inference).
    nq = norm(q.detach().permute({0, 3, 1, 2}), {1}).contiguous();  // [B, h, d]
    nk = norm(k.detach().permute({0, 3, 1, 2}), {1}).contiguous();
    s = matmul(q.detach(), k.detach().transpose(-2, -1)).contiguous();  // [B, h, d, d]
    a = Tensor::empty(s.shape(), s.dtype(), s.device());
    if (a.numel() > 0)
      xca_attention_map_kernel[q.device()](s.view({B * h, d, d}), nq.view({B * h, d}), nk.view({B * h, d}), t, eps,
                                        a.view({B * h, d, d}));
  }
  if (autograd::needs_grad({q, k, temperature}))
    autograd::record(
        "XcaAttentionMapBackward", {q, k, temperature}, a,
        [sq = SavedTensor(q), sk = SavedTensor(k), ss = SavedTensor(s), snq = SavedTensor(nq), snk = SavedTensor(nk),
         sa = SavedTensor(a), st = SavedTensor(t), eps](const Tensor& g, const GradMask& needs) {
          const Tensor qv = sq.unpack("xca_attention_map"), kv = sk.unpack("xca_attention_map"), sv = ss.unpack("xca_attention_map");
          const Tensor nqv = snq.unpack("xca_attention_map"), nkv = snk.unpack("xca_attention_map"), tv = st.unpack("xca_attention_map");
          const int64_t B = qv.size(0), h = qv.size(1), d = qv.size(2);
          NoGradGuard no_grad;
          Tensor gs = Tensor::empty(sv.shape(), sv.dtype(), sv.device());
          Tensor rows = Tensor::empty(nqv.shape(), nqv.dtype(), nqv.device());
          Tensor cols = Tensor::empty(nkv.shape(), nkv.dtype(), nkv.device());
          if (gs.numel() > 0)
            xca_attention_map_backward_kernel[sv.device()](g.contiguous().view({B * h, d, d}),
                                                        sa.unpack("xca_attention_map").view({B * h, d, d}), sv.view({B * h, d, d}),
                                                        nqv.view({B * h, d}), nkv.view({B * h, d}), tv, eps,
                                                        gs.view({B * h, d, d}), rows.view({B * h, d}),
                                                        cols.view({B * h, d}));
          else {
            rows.zero_();
            cols.zero_();
          }
          const Tensor t3 = tv.view({h, 1});  // over [B, h, d]
          Tensor gq, gk, gt;
          if (needs[0]) gq = matmul(gs, kv) + grad_through_norm(t3 * rows, nqv, qv, eps);
          if (needs[1]) gk = matmul(gs.transpose(-2, -1), qv) + grad_through_norm(t3 * cols, nkv, kv, eps);
          if (needs[2]) gt = sum(rows, {0, 2}).view({h, 1, 1});
          return std::vector<Tensor>{gq, gk, gt};
        });
  return a;
}

Tensor factor_attention_merge(const Tensor& m, const Tensor& q, const Tensor& cv, double scale) {
  const char* op = "factor_attention_merge";
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
                       const Tensor qv = sq.unpack("factor_attention_merge"), cvv = scv.unpack("factor_attention_merge");
                       auto maybe = [&](bool needed, const Tensor& like) {
                         return needed ? Tensor::empty(like.shape(), like.dtype(), like.device()) : Tensor();
                       };
                       Tensor gm = maybe(needs[0], qv), gq = maybe(needs[1], qv), gcv = maybe(needs[2], cvv);
                       if (g.numel() > 0)
                         factor_attention_merge_backward_kernel[qv.device()](g.contiguous(), qv, cvv, scale, gm, gq, gcv);
                       return std::vector<Tensor>{gm, gq, gcv};
                     });
  return y;
}

Tensor class_attention(const Tensor& q, const Tensor& k, const Tensor& v, double scale, Tensor* weights) {
  const char* op = "class_attention";
  check_same(q, k, op, "q", "k");
  check_same(q, v, op, "q", "v");
  TS_CHECK(is_floating(q.dtype()), op, ": expected floating tensors, got ", describe(q));
  TS_CHECK(k.dim() == 4 && k.size(2) >= 1 && v.shape() == k.shape(), op,
           ": expected k and v of one shape [B, h, N, d] with N >= 1, got ", k.shape(), " and ", v.shape());
  const int64_t B = k.size(0), h = k.size(1), N = k.size(2), d = k.size(3);
  TS_CHECK((q.shape() == Shape{B, h, 1, d}), op, ": expected q [", B, ", ", h, ", 1, ", d, "] (one query per head of k ",
           k.shape(), "), got ", q.shape());
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
                     [sq = SavedTensor(q), sk = SavedTensor(kc), sv = SavedTensor(vc), sa = SavedTensor(a),
                      scale](const Tensor& g, const GradMask& needs) {
                       const char* name = "class_attention";
                       const Tensor qv = sq.unpack(name), kv = sk.unpack(name), vv = sv.unpack(name);
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
                         class_attention_backward_kernel[kv.device()](g, qv, kv, vv, sa.unpack(name), scale, gq, gk, gv);
                       return std::vector<Tensor>{gq, gk, gv};
                     });
  return y;
}

Tensor xnorm_matmul(const Tensor& q, const Tensor& ctx, const Tensor& gamma, double eps) {
  const char* op = "xnorm_matmul";
  check_same(q, ctx, op, "q", "ctx");
  check_same(q, gamma, op, "q", "gamma");
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
    nq = norm(q.detach(), {-1}).contiguous();                 // [B, h, N]
    p = matmul(q.detach(), ctx.detach()).contiguous();        // [B, h, N, e]
    if (p.numel() > 0) xnorm_matmul_kernel[q.device()](p, nq, gv, eps, y);
  }
  if (autograd::needs_grad({q, ctx, gamma}))
    autograd::record(
        "XnormMatmulBackward", {q, ctx, gamma}, y,
        [sq = SavedTensor(q), sc = SavedTensor(ctx), sp = SavedTensor(p), snq = SavedTensor(nq), sg = SavedTensor(gv),
         eps](const Tensor& g, const GradMask& needs) {
          const char* name = "xnorm_matmul";
          const Tensor qv = sq.unpack(name), cv = sc.unpack(name), pv = sp.unpack(name), nqv = snq.unpack(name);
          const Tensor gamma_h = sg.unpack(name);
          NoGradGuard no_grad;
          Tensor gp = Tensor::empty(pv.shape(), pv.dtype(), pv.device());
          Tensor rows = Tensor::empty(nqv.shape(), nqv.dtype(), nqv.device());
          if (pv.numel() > 0)
            xnorm_matmul_backward_kernel[pv.device()](g, pv, nqv, gamma_h, eps, gp, rows);
          else
            rows.zero_();
          const Tensor gamma3 = gamma_h.view({gamma_h.size(0), 1});  // over [B, h, N]
          Tensor gq, gctx, ggamma;
          if (needs[0]) gq = matmul(gp, cv.transpose(-2, -1)) + grad_through_norm(gamma3 * rows, nqv, qv, eps);
          if (needs[1]) gctx = matmul(qv.transpose(-2, -1), gp);
          if (needs[2]) ggamma = sum(rows, {0, 2}).view({gamma_h.size(0), 1, 1});
          return std::vector<Tensor>{gq, gctx, ggamma};
        });
  return y;
}

}  // namespace tessera
