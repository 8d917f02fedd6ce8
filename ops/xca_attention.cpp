// xca_attention (ops/xca_attention.h): argument checks, dispatch to ops/kernels/xca_attention.h,
// and the gradient. With y = v·aᵀ per (sample, head) and a xca_attention_map's map of q and k:
//   gv = aᵀ·g per token,  ga = g·vᵀ,  and from ga xca_attention_map's gradient (its header comment):
//   gq = gs·k + q_coef·q,  gk = gsᵀ·q + k_coef·k,  gt = Σ_{b,i} R_i,
// all written into one gradient of the qkv projection, in its layout.
#include "tessera/ops/xca_attention.h"

#include <cmath>

#include "tessera/autograd/flop_counter.h"
#include "tessera/autograd/function.h"
#include "tessera/ops/fused_common.h"
#include "tessera/ops/kernels/registry.h"
#include "tessera/ops/reduce.h"
#include "tessera/ops/trace.h"

namespace tessera {

Tensor xca_attention(const Tensor& qkv, const Tensor& temperature, int64_t num_heads, double eps, Tensor* map) {
  // The op's id, and its name for messages and saved tensors (constant: the backward closure reads
  // them without capturing). Function-local, so unity builds see no two files' constants at once.
  constexpr OpId kOp = OpId::xca_attention;
  constexpr const char* op = op_name(kOp);
  TraceScope trace;
  TS_CHECK(qkv.defined(), op, ": qkv is an undefined tensor");
  TS_CHECK(is_floating(qkv.dtype()), op, ": expected a floating qkv, got ", describe(qkv));
  check_parameter(qkv, temperature, op, "temperature");
  TS_CHECK(num_heads > 0, op, ": num_heads must be > 0, got ", num_heads);
  TS_CHECK(qkv.dim() == 3 && qkv.size(2) > 0 && qkv.size(2) % (3 * num_heads) == 0, op,
           ": expected qkv [B, N, 3·h·d] with h = ", num_heads, " heads of d >= 1 channels, got ", qkv.shape());
  const int64_t B = qkv.size(0), N = qkv.size(1), h = num_heads, d = qkv.size(2) / (3 * h);
  TS_CHECK((temperature.shape() == Shape{h, 1, 1}), op, ": expected temperature [", h, ", 1, 1] for ", h,
           " heads, got ", temperature.shape());
  TS_CHECK(eps > 0.0 && std::isfinite(eps), op, ": eps must be finite and > 0, got ", eps);
  const Tensor x = unit_channels(qkv);
  const Tensor t = temperature.detach().reshape({h}).contiguous();
  Tensor y = Tensor::empty({B, N, h * d}, x.dtype(), x.device());
  Tensor s = Tensor::empty({B * h, d, d}, x.dtype(), x.device()), a = Tensor::empty(s.shape(), x.dtype(), x.device());
  Tensor nq = Tensor::empty({B * h, d}, x.dtype(), x.device()), nk = Tensor::empty(nq.shape(), x.dtype(), x.device());
  const auto heads = [h, d](const Tensor& tokens, int64_t parts, int64_t p) {
    return head_part(tokens, parts, p, h, d);
  };
  if (nq.numel() > 0)
    xca_attention_kernel[x.device()](heads(x, 3, 0), heads(x, 3, 1), heads(x, 3, 2), t, eps, s, nq, nk, a,
                                     heads(y, 1, 0));
  FlopCounter::add(2 * B * h * N * d * d);  // q·kᵀ and a·v, the composition's two products
  if (map) *map = a.view({B, h, d, d});
  if (autograd::needs_grad({qkv, temperature}))
    autograd::record("XcaAttentionBackward", {qkv, temperature}, y,
                     [sx = SavedTensor(x), ss = SavedTensor(s), snq = SavedTensor(nq), snk = SavedTensor(nk),
                      sa = SavedTensor(a), st = SavedTensor(t), heads, eps](const Tensor& g, const GradMask& needs) {
                       const Tensor xv = sx.unpack(op), tv = st.unpack(op);
                       const int64_t B = xv.size(0), N = xv.size(1), h = tv.numel(), d = xv.size(2) / (3 * h);
                       NoGradGuard no_grad;
                       const Tensor gy = unit_channels(g);
                       Tensor gx = Tensor::empty(xv.shape(), xv.dtype(), xv.device());
                       Tensor rows = Tensor::empty({B, h, d}, tv.dtype(), xv.device());
                       if (rows.numel() > 0)
                         xca_attention_backward_kernel[xv.device()](
                             heads(gy, 1, 0), heads(xv, 3, 0), heads(xv, 3, 1), heads(xv, 3, 2), sa.unpack(op),
                             ss.unpack(op), snq.unpack(op), snk.unpack(op), tv, eps, heads(gx, 3, 0), heads(gx, 3, 1),
                             heads(gx, 3, 2), rows.view({B * h, d}));
                       FlopCounter::add(4 * B * h * N * d * d);  // the gradients' four products
                       Tensor gt = needs[1] ? sum(rows, {0, 2}).view({h, 1, 1}) : Tensor();
                       return std::vector<Tensor>{needs[0] ? gx : Tensor(), gt};
                     });
  if (trace.outermost()) trace.record(kOp, {qkv, temperature}, {y}, {{"heads", h}, {"eps", eps}});
  return y;
}

}  // namespace tessera
