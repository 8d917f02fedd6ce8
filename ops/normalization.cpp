// Normalization ops: layer_norm and batch_norm (fused kernels, see ops/kernels/normalization.h)
// and normalize (composed from norm and clamp_min, as F.normalize).
//
// Batch norm, with x̂ = (x − μ)·σ⁻¹ per channel and M = N·(H·W·…) values per channel:
//   y = x·scale + shift,  scale = γ·σ⁻¹,  shift = β − μ·scale
//   train (μ, σ² the biased batch statistics):
//     gx = γσ⁻¹·(gy − Σgy/M − x̂·Σ(gy·x̂)/M),  gγ = Σ gy·x̂,  gβ = Σ gy
//   eval (μ, σ² the running statistics, constants): gx = gy·scale, same gγ and gβ.
// The per-channel coefficient arithmetic is done with tensor ops on [C] vectors; the [N, C, S]
// passes are kernels. The per-channel vectors (parameters, statistics, coefficients) are in the
// input's accumulation dtype: float32 beside a half-precision input.
#include "tessera/ops/normalization.h"

#include "tessera/autograd/function.h"
#include "tessera/ops/creation.h"
#include "tessera/ops/elementwise.h"
#include "tessera/ops/fused_common.h"
#include "tessera/ops/kernels/conv.h"
#include "tessera/ops/kernels/registry.h"
#include "tessera/ops/reduce.h"
#include "tessera/ops/trace.h"

namespace tessera {

namespace {

// A per-channel parameter: undefined, or a [C] tensor on x's device in x's accumulation dtype
// (core/dtype.h: float32 beside a half-precision input, which the kernels read as it is).
void check_param(const Tensor& p, const Tensor& x, int64_t C, const char* op, const char* what) {
  if (!p.defined()) return;
  TS_CHECK(p.shape() == Shape{C}, op, ": expected ", what, " of shape [", C, "] for input ", x.shape(), ", got ",
           p.shape());
  check_parameter(x, p, op, what);
}

void check_input(const Tensor& x, int64_t min_dim, const char* op) {
  TS_CHECK(x.defined(), op, ": input is an undefined tensor");
  TS_CHECK(is_floating(x.dtype()), op, ": expected a floating input, got ", describe(x));
  TS_CHECK(x.dim() >= min_dim, op, ": expected an input with at least ", min_dim, " dims, got shape ", x.shape());
}

// A dense channels-last map [N, C, H, W] as the contiguous [N·H·W, C] rows it is in memory (a view).
Tensor as_channel_rows(const Tensor& map) { return map.permute({0, 2, 3, 1}).view({-1, map.size(1)}); }

}  // namespace

Tensor layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps) {
  constexpr const char* op = op_name(OpId::layer_norm);  // for messages and saved tensors
  TraceScope trace;
  check_input(x, 1, op);
  const int64_t C = x.shape().back();
  TS_CHECK(C > 0, "layer_norm: the normalised (last) dim of ", x.shape(), " is empty");
  check_param(weight, x, C, op, "weight");
  check_param(bias, x, C, op, "bias");
  Tensor xc = contiguous_or_undefined(x), wc = contiguous_or_undefined(weight);
  const int64_t rows = x.numel() / C;
  Tensor y = Tensor::empty(x.shape(), x.dtype(), x.device());
  const DType stats = accumulate_dtype(x.dtype());  // a half input's statistics in float32
  Tensor mean = Tensor::empty({rows}, stats, x.device());
  Tensor rstd = Tensor::empty({rows}, stats, x.device());
  layer_norm_kernel[x.device()](xc, wc, contiguous_or_undefined(bias), eps, y, mean, rstd);
  if (autograd::needs_grad({x, weight, bias}))
    autograd::record(
        "LayerNormBackward", {x, weight, bias}, y,
        [sx = SavedTensor(xc), sm = SavedTensor(mean), sr = SavedTensor(rstd), sw = SavedTensor(wc)](
            const Tensor& g, const GradMask& needs) {
          Tensor xv = sx.unpack(op), w = sw.defined() ? sw.unpack(op) : Tensor();
          const Shape cshape{xv.shape().back()};
          // A residual stream's gradient, when it arrived first, takes x's part in the
          // same pass (autograd/node.h gradient_sink): no separate sum.
          const Tensor sink = needs[0] ? autograd::gradient_sink(0) : Tensor();
          const bool add_to_gx = sink.defined() && sink.is_contiguous() && sink.dtype() == xv.dtype();
          Tensor gx = add_to_gx ? sink : needs[0] ? Tensor::empty(xv.shape(), xv.dtype(), xv.device()) : Tensor();
          const DType params = accumulate_dtype(xv.dtype());
          Tensor gw = needs[1] ? Tensor::empty(cshape, params, xv.device()) : Tensor();
          Tensor gb = needs[2] ? Tensor::empty(cshape, params, xv.device()) : Tensor();
          layer_norm_backward_kernel[xv.device()](g.contiguous(), xv, sm.unpack(op), sr.unpack(op), w, gx, add_to_gx,
                                                  gw, gb);
          return std::vector<Tensor>{gx, gw, gb};
        });
  if (trace.outermost()) trace.record(OpId::layer_norm, {x, weight, bias}, {y}, {{"eps", eps}});
  return y;
}

Tensor batch_norm(const Tensor& x, const Tensor& running_mean, const Tensor& running_var, const Tensor& weight,
                  const Tensor& bias, bool training, double momentum, double eps) {
  constexpr const char* op = op_name(OpId::batch_norm);  // for messages and saved tensors
  TraceScope trace;
  check_input(x, 2, op);
  const int64_t C = x.shape()[1];
  check_param(weight, x, C, op, "weight");
  check_param(bias, x, C, op, "bias");
  check_param(running_mean, x, C, op, "running_mean");
  check_param(running_var, x, C, op, "running_var");
  TS_CHECK(running_mean.defined() == running_var.defined(), op,
           ": running_mean and running_var must both be defined or both undefined");
  const bool has_running = running_mean.defined();
  TS_CHECK(!has_running || (!running_mean.requires_grad() && !running_var.requires_grad()), op,
           ": running statistics are buffers and must not require grad");
  const int64_t M = C > 0 ? x.numel() / C : 0;  // values per channel
  TS_CHECK(!training || M > 1, op, ": expected more than 1 value per channel when training, got input ", x.shape());
  TS_CHECK(training || has_running, op, ": eval mode (training=false) needs running_mean and running_var");

  // In eval, a channels-last map (XCiT's LPI in inference) is normalised as the [N·H·W, C] rows it
  // is, with no copy; the batch statistics of training read NCHW planes (a channel's values apart
  // by C would make a GPU's reads of them uncoalesced), and take a copy.
  const bool channels_last_rows = !training && x.dim() == 4 && !x.is_contiguous() && is_channels_last(x);
  Tensor xc = channels_last_rows ? x : contiguous_or_undefined(x), w = contiguous_or_undefined(weight);
  const DType acc = accumulate_dtype(x.dtype());  // of every per-channel vector
  auto per_channel = [&] { return Tensor::empty({C}, acc, x.device()); };
  // The statistics x is normalised with: the batch's (biased) in training, the running ones in eval.
  Tensor mean = per_channel(), var;
  if (training) {
    var = per_channel();
    batch_norm_stats_kernel[x.device()](xc, mean, var);
  } else {
    mean.copy_(running_mean.detach());  // a snapshot: later updates must not change this backward
    var = running_var.detach().contiguous();
  }
  // scale = γσ⁻¹, shift = β − μ·scale; in training the running statistics are updated in place
  // (buffers, not parameters: outside autograd) with the unbiased variance.
  Tensor invstd = per_channel(), scale = per_channel(), shift = per_channel();
  const bool update = training && has_running;
  const double unbias = M > 1 ? static_cast<double>(M) / static_cast<double>(M - 1) : 1.0;
  batch_norm_coefficients_kernel[x.device()](mean, var, w, contiguous_or_undefined(bias), {eps, momentum, unbias},
                                             invstd, scale, shift, update ? Tensor(running_mean) : Tensor(),
                                             update ? Tensor(running_var) : Tensor());
  Tensor y;
  if (channels_last_rows) {  // eval on a channels-last map: y = x·scale + shift row by row, as x lies
    y = Tensor::empty_in_order(x.shape(), channels_last_strides(x.shape()), x.dtype(), x.device());
    channel_affine_kernel[x.device()](as_channel_rows(x), scale, Tensor(), Tensor(), shift, as_channel_rows(y));
  } else {
    y = Tensor::empty(x.shape(), x.dtype(), x.device());
    channel_affine_kernel[x.device()](xc, scale, Tensor(), Tensor(), shift, y);
  }

  if (autograd::needs_grad({x, weight, bias}))
    autograd::record("BatchNormBackward", {x, weight, bias}, y,
                     [training, M, sx = SavedTensor(xc), sm = SavedTensor(mean), si = SavedTensor(invstd),
                      ss = SavedTensor(scale)](const Tensor& g, const GradMask& needs) {
                       Tensor xv = sx.unpack(op).contiguous(), mu = sm.unpack(op), is = si.unpack(op);
                       Tensor k = ss.unpack(op);  // γσ⁻¹
                       Tensor gy = g.contiguous(), gx, gw, gb;
                       Tensor sum_g, sum_gxc;  // Σ gy and Σ gy·(x − μ) per channel
                       if (needs[1] || needs[2] || (training && needs[0])) {
                         sum_g = Tensor::empty(mu.shape(), mu.dtype(), mu.device());
                         sum_gxc = Tensor::empty(mu.shape(), mu.dtype(), mu.device());
                         channel_grad_sums_kernel[xv.device()](gy, xv, mu, sum_g, sum_gxc);
                       }
                       if (needs[0]) {
                         gx = Tensor::empty(xv.shape(), xv.dtype(), xv.device());
                         if (training) {
                           // gx = gy·k + x·β + γ with β = −k·σ⁻²·Σgy(x−μ)/M, γ = −k·Σgy/M − μ·β (and gγ).
                           Tensor beta = Tensor::empty(mu.shape(), mu.dtype(), mu.device());
                           Tensor gamma = Tensor::empty(mu.shape(), mu.dtype(), mu.device());
                           if (needs[1]) gw = Tensor::empty(mu.shape(), mu.dtype(), mu.device());
                           batch_norm_backward_coefficients_kernel[xv.device()](
                               k, is, mu, sum_g, sum_gxc, 1.0 / static_cast<double>(M), beta, gamma, gw);
                           channel_affine_kernel[xv.device()](gy, k, xv, beta, gamma, gx);
                         } else {
                           channel_affine_kernel[xv.device()](gy, k, Tensor(), Tensor(), Tensor(), gx);
                         }
                       }
                       if (needs[1] && !gw.defined()) gw = sum_gxc * is;
                       if (needs[2]) gb = sum_g;
                       return std::vector<Tensor>{gx, gw, gb};
                     });
  if (trace.outermost())
    trace.record(OpId::batch_norm, {x, running_mean, running_var, weight, bias}, {y},
                 {{"eps", eps}, {"training", int64_t{training}}});
  return y;
}

Tensor normalize(const Tensor& x, int64_t dim, double eps) {
  TraceScope trace;
  check_input(x, 1, op_name(OpId::normalize));
  const int64_t d = wrap_dim(dim, x.dim(), op_name(OpId::normalize));
  // norm's gradient is 0 at a zero vector and clamp_min's is 0 below eps, so a zero row gets the
  // finite gradient g/eps, as in PyTorch. float16's smallest value is 6e-8, so eps (1e-12 by
  // default) would round to 0 there and a zero vector divide by zero: it divides in float32.
  // (bfloat16 has float32's exponent range.)
  if (x.dtype() == DType::Float16) return normalize(x.to(DType::Float32), dim, eps).to(x.dtype());
  Tensor y = x / clamp_min(norm(x, {d}, true), eps);
  if (trace.outermost()) trace.record(OpId::normalize, {x}, {y}, {{"dim", d}, {"eps", eps}});
  return y;
}

}  // namespace tessera
