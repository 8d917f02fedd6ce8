// The op table (tests/op_samples/) on the CPU, in every build:
//   - the float64 finite-difference gradient check (tests/gradcheck.h) of every differentiable
//     sample: each floating input becomes a float64 leaf that requires grad (unless the sample
//     lists it in no_grad); integer and bool inputs stay as they are;
//   - coverage per op (every op of ops/op_list.h has samples, in its family's file) and per kernel
//     (every kernel table of ops/kernels/registry.h is called by some sample's forward or backward);
//   - the op list's trace column (what each op reports to an op tracer) against what it reports.
// The same samples run on every device in tests/cuda/test_op_samples.cpp.
#include <catch2/catch.hpp>

#include <algorithm>
#include <map>
#include <set>

#include "tessera/ops/kernels/registry.h"
#include "tessera/ops/trace.h"
#include "tests/gradcheck.h"
#include "tests/kernel_calls.h"
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
      INFO(op.name() << ": " << sample.name);
      CHECK_GRADS(sample.call, leaves, op.grad);
      ++checked;
    }
  }
  CHECK(checked > 0);
}

// The sample's forward pass and, where its output takes a gradient, its backward pass, on the CPU.
void run_forward_backward(const SampleInput& sample) {
  const Layout leaves = make_layout(sample.inputs, Device::cpu(), false, sample.device);
  const Tensor y = sample.call(leaves.operands);
  if (y.requires_grad()) y.backward(ones_like(y));
}

// Records which ops report themselves to a tracer (ops/trace.h), outermost calls only.
class TracedOps final : public OpTracer {
 public:
  TracedOps() : previous_(OpTracer::install(this)) {}
  ~TracedOps() override { OpTracer::install(previous_); }
  TracedOps(const TracedOps&) = delete;
  TracedOps& operator=(const TracedOps&) = delete;
  void record(const TracedOp& op) override { seen.insert(op.op); }
  std::set<OpId> seen;

 private:
  OpTracer* previous_;
};

}  // namespace

TEST_CASE("every op of the op list has samples, in its family's file", "[op_samples][coverage]") {
  std::set<OpId> sampled;
  for (const OpInfo& op : all_op_samples()) sampled.insert(op.op);  // family_ops checks each op's family
  std::string missing;
  for (const OpDecl& op : all_ops())
    if (sampled.count(op.id) == 0) missing += std::string(missing.empty() ? "" : ", ") + op.name;
  INFO("ops of ops/op_list.h without samples in tests/op_samples/: " << missing);
  CHECK(missing.empty());
  CHECK(sampled.size() == kOpCount);
}

TEST_CASE("every kernel table is called by some op sample on the CPU", "[op_samples][coverage]") {
  KernelCalls calls;
  for (const OpInfo& op : all_op_samples())
    for (const SampleInput& sample : op.samples()) {
      INFO(op.name() << ": " << sample.name);
      run_forward_backward(sample);
    }
  std::string missing;
  for (const KernelTableInfo& table : kernel_tables())
    if (calls.calls.count(table.name) == 0) missing += std::string(missing.empty() ? "" : ", ") + table.name;
  INFO("kernel tables that no sample called: " << missing);
  CHECK(missing.empty());
}

// Lowered and Refused ops report themselves in some sample of theirs; Untraced ops never do (what
// they run reports itself). A wrong column would send the exporter the wrong way.
TEST_CASE("the op list's trace column is what each op reports to a tracer", "[op_samples][coverage]") {
  std::map<OpId, bool> reported;
  for (const OpInfo& op : all_op_samples()) {
    TracedOps traced;
    NoGradGuard no_grad;
    for (const SampleInput& sample : op.samples()) sample.call(sample.inputs);
    reported[op.op] = reported[op.op] || traced.seen.count(op.op) > 0;
  }
  for (const OpDecl& op : all_ops()) {
    INFO(op.name);
    CHECK(reported[op.id] == (op.trace != OpTrace::Untraced));
  }
}

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
TEST_CASE("op samples: float64 gradients of the views and copies", "[op_samples][views]") {
  check_gradients(family_ops("views"));
}
