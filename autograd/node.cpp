#include "tessera/autograd/node.h"

#include <atomic>

#include "tessera/autograd/grad_mode.h"
#include "tessera/ops/kernels/registry.h"

namespace tessera::autograd {

namespace {
std::atomic<int64_t> live_nodes{0};

// Nodes whose last owner was a node being destroyed wait here, so that destroying a long chain is
// a loop rather than a recursion of destructors (a 100k-deep graph would overflow the stack).
thread_local std::vector<std::shared_ptr<Node>> pending_teardown;
thread_local bool tearing_down = false;
}  // namespace

Node::Node(std::string name, uint32_t num_outputs) : name_(std::move(name)), num_outputs_(num_outputs) {
  live_nodes.fetch_add(1);
}

Node::~Node() {
  for (Edge& edge : next)
    if (edge && edge.node.use_count() == 1) pending_teardown.push_back(std::move(edge.node));
  next.clear();
  live_nodes.fetch_sub(1);
  if (tearing_down) return;
  tearing_down = true;
  while (!pending_teardown.empty()) {
    std::shared_ptr<Node> n = std::move(pending_teardown.back());
    pending_teardown.pop_back();
    n.reset();  // its destructor only queues its own children
  }
  tearing_down = false;
}

void Node::release() {
  released_ = true;
  next.clear();
}

int64_t Node::live_count() { return live_nodes.load(); }

namespace {
GradMask needs_of(const std::vector<Edge>& next) {
  GradMask needs(next.size());
  for (size_t i = 0; i < next.size(); ++i) needs[i] = static_cast<bool>(next[i]);
  return needs;
}
}  // namespace

std::vector<Tensor> FunctionNode::apply(const std::vector<Tensor>& grad_outputs) {
  return fn_(grad_outputs.front(), needs_of(next));
}

void FunctionNode::release() {
  Node::release();
  fn_ = nullptr;  // drops the saved tensors
}

std::vector<Tensor> MultiFunctionNode::apply(const std::vector<Tensor>& grad_outputs) {
  return fn_(grad_outputs, needs_of(next));
}

void MultiFunctionNode::release() {
  Node::release();
  fn_ = nullptr;
}

AccumulateGrad::AccumulateGrad(const std::shared_ptr<TensorImpl>& leaf) : Node("AccumulateGrad"), leaf_(leaf) {}

std::vector<Tensor> AccumulateGrad::apply(const std::vector<Tensor>& grad_outputs) {
  const Tensor& grad_output = grad_outputs.front();
  std::shared_ptr<TensorImpl> impl = leaf_.lock();
  if (!impl) return {};  // the leaf is gone; nobody can read its gradient
  Tensor leaf(impl);
  NoGradGuard no_grad;
  if (!leaf.grad().defined()) {
    // The leaf must own its gradient buffer. A gradient nobody else references (the engine's
    // buffer, a fresh contiguous tensor) is adopted as is; anything that may alias another tensor
    // or is an expanded view is copied.
    const bool exclusive = grad_output.impl_ptr().use_count() == 1 && grad_output.impl().storage.use_count() == 1 &&
                           grad_output.is_contiguous() && grad_output.offset() == 0 &&
                           grad_output.impl().storage->nbytes() == grad_output.numel() * grad_output.element_size();
    if (exclusive) {
      leaf.set_grad(grad_output.detach());
    } else {
      Tensor copy = Tensor::empty(grad_output.shape(), grad_output.dtype(), grad_output.device());
      copy_kernel[copy.device()](grad_output, copy);
      leaf.set_grad(copy);
    }
  } else {
    accumulate(leaf.grad(), grad_output, true);
  }
  // Copied: a hook may remove itself or register others.
  const auto hooks = meta_of(*impl)->post_accumulate_hooks;
  for (const auto& [handle, hook] : hooks) hook(leaf);
  return {};
}

Tensor accumulate(const Tensor& a, const Tensor& b, bool in_place) {
  TS_CHECK(a.dtype() == b.dtype() && a.device() == b.device(), "backward: gradients ", describe(a), " and ",
           describe(b), " cannot be summed (internal error)");
  // A new sum keeps the first gradient's layout (the gradients of q, k and v of a permuted qkv
  // projection add up in the projection's own layout).
  Tensor out = in_place ? a : Tensor::empty_in_order(a.shape(), a.strides(), a.dtype(), a.device());
  binary_kernel[a.device()](BinaryOp::Add, a, b, out);
  if (in_place) out.impl().storage->bump_version();
  return out;
}

Tensor add_into_part(const Tensor& sink, const Tensor& region, const Tensor& part) {
  accumulate(region, part, true);
  return sink;
}

SavedTensor::SavedTensor(const Tensor& t) {
  if (!t.defined()) return;
  data_ = t.detach();
  version_ = t.version();
}

Tensor SavedTensor::unpack(const std::string& op) const {
  TS_CHECK(data_.defined(), op, ": a tensor saved for backward is missing (internal error)");
  TS_CHECK(data_.version() == version_, op,
           ": one of the tensors needed for gradient computation has been modified by an in-place "
           "operation: it is at version ",
           data_.version(), ", expected version ", version_, " (", describe(data_), ")");
  return data_;
}

}  // namespace tessera::autograd
