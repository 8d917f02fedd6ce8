// The autograd graph. Every differentiable op that sees an input requiring grad (while grad mode is
// on) creates one Node and makes it the grad_fn of its output (or outputs: an op with several
// outputs, such as a multi-tensor cast, has one node, and each output knows which of the node's
// outputs it is). A Node holds one edge per input: the input's own grad_fn with the input's output
// number, the AccumulateGrad node of a leaf, or null when that input needs no gradient. Edges are the
// only owning links of the graph, so a graph lives exactly as long as the outputs that reach it, and
// tearing it down is iterative (see ~Node).
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "tessera/core/tensor.h"

namespace tessera::autograd {

class Node;

// Where the gradient of one input goes: the node that produced the input, and which of that node's
// outputs the input is (0 for a single-output node and for a leaf's AccumulateGrad).
struct Edge {
  std::shared_ptr<Node> node;
  uint32_t output = 0;
  explicit operator bool() const { return node != nullptr; }
};

class Node {
 public:
  explicit Node(std::string name, uint32_t num_outputs = 1);
  virtual ~Node();
  Node(const Node&) = delete;
  Node& operator=(const Node&) = delete;

  // Given the gradients of this node's outputs (one per output, an undefined Tensor for an output
  // that no consumer sent a gradient; at least one is defined), returns one gradient per input edge
  // (an undefined Tensor where the edge is null or the input gets no gradient).
  virtual std::vector<Tensor> apply(const std::vector<Tensor>& grad_outputs) = 0;
  // Frees saved tensors and edges after backward (unless retain_graph); a later backward through
  // this node is an error.
  virtual void release();

  const std::string& name() const { return name_; }
  bool released() const { return released_; }
  uint32_t num_outputs() const { return num_outputs_; }

  std::vector<Edge> next;           // one per input
  std::vector<Shape> input_shapes;  // for the gradient shape check in the engine
  std::vector<DType> input_dtypes;
  uint64_t sequence = 0;  // creation order; later nodes run first in backward

  static int64_t live_count();  // Nodes alive in the process (leak tests)

 protected:
  std::string name_;
  uint32_t num_outputs_;
  bool released_ = false;
};

// Which inputs of a node need a gradient: needs[i] is false for inputs that do not require grad,
// so backward formulas can skip work (PyTorch's grad_input_mask).
using GradMask = std::vector<bool>;
using BackwardFn = std::function<std::vector<Tensor>(const Tensor& grad_output, const GradMask& needs)>;
// The backward of an op with several outputs: the gradients of all its outputs (undefined where no
// consumer sent one).
using MultiBackwardFn =
    std::function<std::vector<Tensor>(const std::vector<Tensor>& grad_outputs, const GradMask& needs)>;

// The node type used by ops: its backward is a closure written next to the op's forward.
// The closure must capture only SavedTensors, shapes and scalars — never a Tensor with history —
// so that the graph's only owning links stay the edges.
class FunctionNode final : public Node {
 public:
  FunctionNode(std::string name, BackwardFn fn) : Node(std::move(name)), fn_(std::move(fn)) {}
  std::vector<Tensor> apply(const std::vector<Tensor>& grad_outputs) override;
  void release() override;

 private:
  BackwardFn fn_;
};

// The same for an op with several outputs.
class MultiFunctionNode final : public Node {
 public:
  MultiFunctionNode(std::string name, uint32_t num_outputs, MultiBackwardFn fn)
      : Node(std::move(name), num_outputs), fn_(std::move(fn)) {}
  std::vector<Tensor> apply(const std::vector<Tensor>& grad_outputs) override;
  void release() override;

 private:
  MultiBackwardFn fn_;
};

// Sink of a leaf tensor: adds the incoming gradient into leaf.grad(). Holds the leaf weakly (the
// leaf owns its AutogradMeta which refers back to this node).
class AccumulateGrad final : public Node {
 public:
  explicit AccumulateGrad(const std::shared_ptr<TensorImpl>& leaf);
  std::vector<Tensor> apply(const std::vector<Tensor>& grad_outputs) override;
  void release() override {}  // a leaf's sink outlives every backward

 private:
  std::weak_ptr<TensorImpl> leaf_;
};

struct AutogradMeta final : AutogradMetaInterface {
  bool requires_grad = false;  // set on leaves by the user
  Tensor grad;
  std::shared_ptr<Node> grad_fn;         // non-leaf tensors: the node that produced them
  uint32_t output_nr = 0;                // ... and which of its outputs this tensor is
  std::weak_ptr<Node> grad_accumulator;  // leaf tensors: their AccumulateGrad, made on demand
  // Leaf tensors: run by AccumulateGrad after it has added a pass's gradient (autograd/hooks.h),
  // with their removal handles.
  std::vector<std::pair<int64_t, std::function<void(const Tensor&)>>> post_accumulate_hooks;
};

// The autograd metadata of a tensor (null if it never took part in autograd), and the same made
// on demand. Only autograd creates it, so the downcast is safe.
inline AutogradMeta* meta_of(const TensorImpl& impl) { return static_cast<AutogradMeta*>(impl.autograd.get()); }
inline AutogradMeta& ensure_meta(TensorImpl& impl) {
  if (!impl.autograd) impl.autograd = std::make_unique<AutogradMeta>();
  return *meta_of(impl);
}

// out = a + b for the engine's gradient sums, straight through the device kernel (autograd sits
// below the op front ends): a fresh tensor, or `a` itself when `in_place` (a is owned by the caller
// alone and no two of its elements share an address; any layout). Shapes and dtypes match; b may be
// any view.
Tensor accumulate(const Tensor& a, const Tensor& b, bool in_place);

// Gradient sinks. An input's gradient that several consumers send is summed by the engine: the
// first part waits in a buffer, each later one is added to it (accumulate above) — a pass that reads
// two tensors and writes one, as large as the activation (a residual stream's gradient meets its
// branch's at every block). When the running node has such a buffer for input `input`, owned by the
// engine alone (levers accumulate_in_place and gradient_sinks on; no other input of the node feeds
// the same buffer), this returns it: a backward formula that can add its result into it within its
// own kernel (layer norm), or add only the part it touches (a slice's gradient is zero elsewhere),
// does so and returns the buffer itself as that input's gradient, and the engine adds nothing.
// Undefined when there is none (the formula then returns its gradient as usual). The buffer has the
// input's shape and dtype, and may lie in any dense layout.
Tensor gradient_sink(size_t input);
// Adds `part` into `region`, a view of `sink` (a slice of it: the elements an input's view took),
// in place, and returns the sink: a view's gradient given a sink.
Tensor add_into_part(const Tensor& sink, const Tensor& region, const Tensor& part);

// A tensor kept for backward: its data (shared storage, no history, so no ownership cycles) and
// the storage version at save time. unpack() throws if the tensor was modified in place since.
class SavedTensor {
 public:
  SavedTensor() = default;
  explicit SavedTensor(const Tensor& t);
  Tensor unpack(const std::string& op) const;
  bool defined() const { return data_.defined(); }

 private:
  Tensor data_;
  uint64_t version_ = 0;
};

}  // namespace tessera::autograd
