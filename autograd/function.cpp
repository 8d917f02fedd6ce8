#include "tessera/autograd/function.h"

#include <atomic>

namespace tessera::autograd {

namespace {
std::atomic<uint64_t> next_sequence{0};

// The edge that carries gradient into `t`: its grad_fn, or its leaf sink, or none.
std::shared_ptr<Node> edge_of(const Tensor& t) {
  if (!t.defined() || !t.requires_grad()) return nullptr;
  AutogradMeta& meta = *meta_of(t.impl());
  if (meta.grad_fn) return meta.grad_fn;
  std::shared_ptr<Node> acc = meta.grad_accumulator.lock();
  if (!acc) {
    acc = std::make_shared<AccumulateGrad>(t.impl_ptr());
    meta.grad_accumulator = acc;
  }
  return acc;
}
}  // namespace

bool needs_grad(std::initializer_list<Tensor> inputs) {
  if (!grad_enabled()) return false;
  for (const Tensor& t : inputs)
    if (t.defined() && t.requires_grad()) return true;
  return false;
}

bool needs_grad(const std::vector<Tensor>& inputs) {
  if (!grad_enabled()) return false;
  for (const Tensor& t : inputs)
    if (t.defined() && t.requires_grad()) return true;
  return false;
}

void record(const char* name, const std::vector<Tensor>& inputs, Tensor& output, BackwardFn fn) {
  auto node = std::make_shared<FunctionNode>(name, std::move(fn));
  node->sequence = next_sequence.fetch_add(1);
  node->next.reserve(inputs.size());
  for (const Tensor& t : inputs) {
    node->next.push_back(edge_of(t));
    node->input_shapes.push_back(t.defined() ? t.shape() : Shape{});
    node->input_dtypes.push_back(t.defined() ? t.dtype() : DType::Float32);
  }
  ensure_meta(output.impl()).grad_fn = std::move(node);
}

}  // namespace tessera::autograd
