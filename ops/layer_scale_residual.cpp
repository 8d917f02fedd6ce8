// layer_scale_residual (ops/layer_scale_residual.h): argument checks, dispatch to
// ops/kernels/layer_scale_residual.h, and the gradient.
//   y = x + s·gamma·f:   gx = g,  gf = g·s·gamma,  ggamma = Σ_rows g·s·f   (s a constant)
#include "tessera/ops/layer_scale_residual.h"

#include "tessera/autograd/function.h"
#include "tessera/ops/autocast_operands.h"
#include "tessera/ops/fused_common.h"
#include "tessera/ops/kernels/registry.h"
#include "tessera/ops/trace.h"

namespace tessera {

Tensor layer_scale_residual(const Tensor& x_in, const Tensor& f_in, const Tensor& gamma, const Tensor& sample_scale) {
  // The op's id, and its name for messages and saved tensors (constant: the backward closure reads
  // them without capturing). Function-local, so unity builds see no two files' constants at once.
  constexpr OpId kOp = OpId::layer_scale_residual;
  constexpr const char* op = op_name(kOp);
  TraceScope trace;
  const auto [x, f] = autocast_meet(x_in, f_in);
  check_same(x, f, op, "x", "f");
  check_parameter(x, gamma, op, "gamma");
  TS_CHECK(is_floating(x.dtype()), op, ": expected floating tensors, got ", describe(x));
  TS_CHECK(x.dim() >= 1 && x.shape() == f.shape(), op, ": x ", x.shape(), " and f ", f.shape(),
           " must have one shape of at least one dim");
  const int64_t C = x.shape().back();
  TS_CHECK(gamma.shape() == Shape{C}, op, ": expected gamma [", C, "] for x ", x.shape(), ", got ", gamma.shape());
  if (sample_scale.defined()) {
    check_parameter(x, sample_scale, op, "sample_scale");
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
    autograd::record(
        "LayerScaleResidualBackward", {x, f, gamma}, y,
        [sf = SavedTensor(fc), sg = SavedTensor(gc), ss = SavedTensor(sc)](const Tensor& g, const GradMask& needs) {
          const Tensor fv = sf.unpack(op), gv = sg.unpack(op);
          const Tensor sv = ss.defined() ? ss.unpack(op) : Tensor();
          Tensor gf = needs[1] ? Tensor::empty(fv.shape(), fv.dtype(), fv.device()) : Tensor();
          Tensor ggamma = needs[2] ? Tensor::empty(gv.shape(), gv.dtype(), gv.device()) : Tensor();
          if ((gf.defined() || ggamma.defined()) && fv.numel() > 0)
            layer_scale_residual_backward_kernel[fv.device()](g.contiguous(), fv, gv, sv, gf, ggamma);
          else if (ggamma.defined()) ggamma.zero_();
          return std::vector<Tensor>{needs[0] ? g : Tensor(), gf, ggamma};
        });
  if (trace.outermost()) trace.record(kOp, {x, f, gamma, sample_scale}, {y});
  return y;
}

}  // namespace tessera
