// linear_gelu (ops/linear_gelu.h): argument checks, dispatch to ops/kernels/linear_gelu.h, and the gradient.
//   y = gelu(x·Wᵀ + b):  with h = x·Wᵀ + b and gh = g·gelu'(h):  gx = gh·W,  gW = ghᵀ·x,  gb = Σ_rows gh
#include "tessera/ops/linear_gelu.h"

#include "tessera/autograd/flop_counter.h"
#include "tessera/autograd/function.h"
#include "tessera/core/autocast.h"
#include "tessera/ops/autocast_weights.h"
#include "tessera/ops/elementwise.h"
#include "tessera/ops/fused_common.h"
#include "tessera/ops/kernels/registry.h"
#include "tessera/ops/linalg.h"
#include "tessera/ops/trace.h"

namespace tessera {

Tensor linear_gelu(const Tensor& x, const Tensor& weight, const Tensor& bias, bool approximate) {
  // The op's id, and its name for messages and saved tensors (constant: the backward closure reads
  // them without capturing). Function-local, so unity builds see no two files' constants at once.
  constexpr OpId kOp = OpId::linear_gelu;
  constexpr const char* op = op_name(kOp);
  TraceScope trace;
  // Under autocast the GEMM computes in the low precision (core/autocast.h): with low activations
  // the fused op runs on the rounded operands, with float32 activations the composition does.
  if (const auto low = autocast_for(x, weight)) {
    if (amp_activations() == AmpActivations::Low)
      return linear_gelu(x.to(*low), autocast_cast(weight, *low), bias, approximate);
    return gelu(linear(x, weight, bias), approximate);
  }
  check_same(x, weight, op, "input", "weight");
  check_parameter(x, bias, op, "bias");
  TS_CHECK(weight.dim() == 2 && x.dim() >= 1 && x.size(-1) == weight.size(1), op, ": input ", x.shape(),
           " does not fit weight [out_features, in_features] ", weight.shape());
  const int64_t in = weight.size(1), out_features = weight.size(0);
  TS_CHECK(bias.shape() == Shape{out_features}, op, ": expected bias [", out_features, "] for weight ", weight.shape(),
           ", got ", bias.shape());
  Shape lead(x.shape().begin(), x.shape().end() - 1);
  const int64_t rows = numel_of(lead);
  // The GEMM without its bias, then bias and GELU in one pass; the product is kept (pre) only for a
  // backward, which makes h again from it.
  const bool keep_pre = autograd::needs_grad({x, weight, bias});
  Tensor y = Tensor::empty({rows, out_features}, x.dtype(), x.device());
  Tensor pre = keep_pre ? Tensor::empty(y.shape(), x.dtype(), x.device()) : Tensor();
  const Tensor b = bias.detach().contiguous();
  if (y.numel() > 0)
    linear_gelu_kernel[x.device()](gemm_operand(x.detach().reshape({rows, in})), gemm_operand(weight.detach().t()), b,
                                   approximate, pre, y);
  FlopCounter::add(rows * in * out_features);
  Shape out_shape = lead;
  out_shape.push_back(out_features);
  Tensor result = y.view(out_shape);
  if (keep_pre)
    autograd::record("LinearGeluBackward", {x, weight, bias}, result,
                     [sx = SavedTensor(x), sw = SavedTensor(weight), sp = SavedTensor(pre), sb = SavedTensor(b),
                      approximate, rows, in, x_shape = x.shape()](const Tensor& g, const GradMask& needs) {
                       const Tensor pv = sp.unpack(op);
                       Tensor gpre = Tensor::empty(pv.shape(), pv.dtype(), pv.device());
                       Tensor gb =
                           needs[2] ? Tensor::empty({pv.size(1)}, accumulate_dtype(pv.dtype()), pv.device()) : Tensor();
                       if (pv.numel() > 0)
                         linear_gelu_backward_kernel[pv.device()](g.contiguous().view(pv.shape()), pv, sb.unpack(op),
                                                                  approximate, gpre, gb);
                       else if (gb.defined()) gb.zero_();
                       Tensor gx, gw;
                       if (needs[0]) gx = matmul(gpre, sw.unpack(op)).view(x_shape);
                       if (needs[1]) gw = matmul(gpre.t(), sx.unpack(op).reshape({rows, in}));
                       return std::vector<Tensor>{gx, gw, gb};
                     });
  if (trace.outermost()) trace.record(kOp, {x, weight, bias}, {result}, {{"tanh", int64_t{approximate}}});
  return result;
}

}  // namespace tessera
