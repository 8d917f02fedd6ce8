#include "tessera/autograd/function.h"

#include <atomic>

namespace tessera::autograd {

namespace {
std::atomic<uint64_t> next_sequence{0};

// The edge that carries gradient into `t`: its grad_fn, or its leaf sink, or none.
Edge edge_of(const Tensor& t) {
  if (!t.defined() || !t.requires_grad()) return {};
  AutogradMeta& meta = *meta_of(t.impl());
  if (meta.grad_fn) return {meta.grad_fn, meta.output_nr};
  std::shared_ptr<Node> acc = meta.grad_accumulator.lock();
  if (!acc) {
    acc = std::make_shared<AccumulateGrad>(t.impl_ptr());
    meta.grad_accumulator = acc;
  }
  return {acc, 0};
}

void connect(Node& node, const std::vector<Tensor>& inputs) {
  node.sequence = next_sequence.fetch_add(1);
  node.next.reserve(inputs.size());
  for (const Tensor& t : inputs) {
    node.next.push_back(edge_of(t));
    node.input_shapes.push_back(t.defined() ? t.shape() : Shape{});
    node.input_dtypes.push_back(t.defined() ? t.dtype() : DType::Float32);
  }
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
  connect(*node, inputs);
  AutogradMeta& meta = ensure_meta(output.impl());
  meta.grad_fn = std::move(node);
  meta.output_nr = 0;
}

void record(const char* name, const std::vector<Tensor>& inputs, std::vector<Tensor>& outputs, MultiBackwardFn fn) {
  auto node = std::make_shared<MultiFunctionNode>(name, static_cast<uint32_t>(outputs.size()), std::move(fn));
  connect(*node, inputs);
  for (size_t i = 0; i < outputs.size(); ++i) {
    AutogradMeta& meta = ensure_meta(outputs[i].impl());
    meta.grad_fn = node;
    meta.output_nr = static_cast<uint32_t>(i);
  }
}

}  // namespace tessera::autograd
