// The float64 finite-difference gradient check (tests/gradcheck.h) of every differentiable sample of
// the op table (tests/op_samples/), on the CPU: each floating input becomes a float64 leaf that
// requires grad (unless the sample lists it in no_grad); integer and bool inputs stay as they are.
// The same samples run on every device in tests/cuda/test_op_samples.cpp.
#include <catch2/catch.hpp>

#include <algorithm>

#include "tests/gradcheck.h"
#include "tests/op_samples/op_info.h"

using namespace tessera;
using namespace tessera::testing;

namespace {

// Checks the gradients of every sample of `ops` that has a gradient check; a family in which none
// ran fails (its samples would then be checked on devices only).
void check_gradients(const std::vector<OpInfo>& ops) {
  int checked = 0;
  for (const OpInfo& op : ops) {
    if (!op.differentiable) continue;
    for (const SampleInput& sample : op.samples()) {
      if (!sample.gradcheck || !sample.device.backward) continue;
      Inputs leaves;
      bool any_grad = false;
      for (size_t i = 0; i < sample.inputs.size(); ++i) {
        const Tensor& x = sample.inputs[i];
        if (!is_floating(x.dtype())) {
          leaves.push_back(x);
          continue;
        }
        Tensor leaf = x.to(DType::Float64).detach().clone();
        const auto& no_grad = sample.device.no_grad;
        if (std::find(no_grad.begin(), no_grad.end(), i) == no_grad.end()) {
          leaf.set_requires_grad(true);
          any_grad = true;
        }
        leaves.push_back(leaf);
      }
      if (!any_grad) continue;  // integer or bool values only: nothing to differentiate
      INFO(op.name << ": " << sample.name);
      CHECK_GRADS(sample.call, leaves, op.grad);
      ++checked;
    }
  }
  CHECK(checked > 0);
}

}  // namespace

TEST_CASE("op samples: float64 gradients of the elementwise ops", "[op_samples][elementwise]") {
  check_gradients(family_ops("elementwise"));
}
TEST_CASE("op samples: float64 gradients of the reductions", "[op_samples][reduce]") {
  check_gradients(family_ops("reduce"));
}
TEST_CASE("op samples: float64 gradients of softmax", "[op_samples][softmax]") {
  check_gradients(family_ops("softmax"));
}
TEST_CASE("op samples: float64 gradients of the losses", "[op_samples][loss]") { check_gradients(family_ops("loss")); }
TEST_CASE("op samples: float64 gradients of matmul and linear", "[op_samples][linalg]") {
  check_gradients(family_ops("linalg"));
}
TEST_CASE("op samples: float64 gradients of the convolutions", "[op_samples][conv]") {
  check_gradients(family_ops("conv"));
}
TEST_CASE("op samples: float64 gradients of the normalizations", "[op_samples][normalization]") {
  check_gradients(family_ops("normalization"));
}
TEST_CASE("op samples: float64 gradients of the indexing ops", "[op_samples][indexing]") {
  check_gradients(family_ops("indexing"));
}
TEST_CASE("op samples: float64 gradients of interpolate", "[op_samples][interpolate]") {
  check_gradients(family_ops("interpolate"));
}
TEST_CASE("op samples: float64 gradients of the fused ops", "[op_samples][fused]") {
  check_gradients(family_ops("fused"));
}
