#include "tessera/testing/gradcheck.h"

#include <cmath>
#include <sstream>

#include "tessera/autograd/grad_mode.h"
#include "tessera/core/error.h"
#include "tessera/ops/ops.h"

namespace tessera {

double& float64_element(const Tensor& t, int64_t i) {
  int64_t offset = 0;
  for (int64_t d = t.dim() - 1; d >= 0; --d) {
    offset += (i % t.shape()[d]) * t.strides()[d];
    i /= t.shape()[d];
  }
  return t.data<double>()[offset];
}

std::string gradcheck(const GradcheckFn& f, const std::vector<Tensor>& inputs, GradcheckOptions options) {
  for (size_t k = 0; k < inputs.size(); ++k)
    TS_CHECK(!inputs[k].requires_grad() || (inputs[k].dtype() == DType::Float64 && inputs[k].device().is_cpu()),
             "gradcheck: input ", k, " requires grad, so it must be a float64 tensor on the cpu (finite differences ",
             "need the precision), got ", dtype_name(inputs[k].dtype()), " on ", inputs[k].device().str());
  Tensor out = f(inputs);
  Generator gen(1234);
  Tensor upstream = randn(out.shape(), DType::Float64, &gen);
  for (const Tensor& t : inputs)
    if (t.requires_grad() && t.is_leaf()) t.set_grad(Tensor());
  out.backward(upstream);

  for (size_t k = 0; k < inputs.size(); ++k) {
    const Tensor& x = inputs[k];
    if (!x.requires_grad()) continue;
    // The gradient lives on the leaf the input is a view of; the input itself may be a view.
    Tensor analytic = x.grad();
    if (!analytic.defined()) return "input " + std::to_string(k) + " received no gradient";
    if (analytic.shape() != x.shape()) return "input " + std::to_string(k) + " gradient has the wrong shape";
    analytic = analytic.contiguous();
    for (int64_t i = 0; i < x.numel(); ++i) {
      double& v = float64_element(x, i);
      const double saved = v;
      double plus, minus;
      {
        NoGradGuard no_grad;
        v = saved + options.eps;
        plus = (f(inputs) * upstream).sum().item();
        v = saved - options.eps;
        minus = (f(inputs) * upstream).sum().item();
        v = saved;
      }
      const double numeric = (plus - minus) / (2 * options.eps);
      const double got = float64_element(analytic, i);
      if (std::abs(got - numeric) > options.atol + options.rtol * std::abs(numeric)) {
        std::ostringstream os;
        os << "input " << k << " element " << i << ": analytic " << got << " vs numeric " << numeric;
        return os.str();
      }
    }
  }
  return "";
}

}  // namespace tessera
