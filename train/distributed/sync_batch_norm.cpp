#include "tessera/train/distributed/sync_batch_norm.h"

#include "tessera/autograd/function.h"
#include "tessera/nn/layers.h"
#include "tessera/ops/ops.h"

namespace tessera::train::dist {

Tensor all_reduce_sum(const Tensor& x, const std::shared_ptr<Communicator>& comm) {
  Tensor out;
  {
    NoGradGuard no_grad;
    out = x.contiguous().clone();
  }
  comm->allreduce(out, ReduceOp::Sum);
  if (autograd::needs_grad({x}))
    autograd::record("AllReduceSumBackward", {x}, out, [comm](const Tensor& g, const GradMask&) {
      Tensor summed = g.contiguous().clone();
      comm->allreduce(summed, ReduceOp::Sum);
      return std::vector<Tensor>{summed};
    });
  return out;
}

int64_t convert_sync_batchnorm(nn::Module& model, const std::shared_ptr<Communicator>& comm) {
  int64_t converted = 0;
  std::vector<nn::Module*> stack{&model};
  while (!stack.empty()) {
    nn::Module* m = stack.back();
    stack.pop_back();
    if (auto* bn = dynamic_cast<nn::BatchNorm2d*>(m)) {
      if (!bn->sum_over_processes) ++converted;  // a module registered under two names counts once
      bn->sum_over_processes = [comm](const Tensor& t) { return all_reduce_sum(t, comm); };
    }
    for (const auto& [name, child] : m->named_children()) stack.push_back(child.get());
  }
  return converted;
}

}  // namespace tessera::train::dist
