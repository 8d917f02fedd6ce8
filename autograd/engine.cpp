#include "tessera/autograd/engine.h"

#include <queue>
#include <unordered_map>

#include "tessera/autograd/function.h"
#include "tessera/core/levers.h"

namespace tessera::autograd {

namespace {

struct LaterFirst {
  bool operator()(const Node* a, const Node* b) const { return a->sequence < b->sequence; }
};

// Counts, for every node reachable from `root`, how many edges point at it.
std::unordered_map<Node*, int> count_dependencies(Node* root) {
  std::unordered_map<Node*, int> deps;
  std::vector<Node*> stack{root};
  deps[root] = 0;
  while (!stack.empty()) {
    Node* n = stack.back();
    stack.pop_back();
    for (const Edge& edge : n->next) {
      if (!edge) continue;
      auto [it, inserted] = deps.try_emplace(edge.node.get(), 0);
      ++it->second;
      if (inserted) stack.push_back(edge.node.get());
    }
  }
  return deps;
}

// True when nothing but the engine's buffer refers to `t` or its memory, and t fills its memory
// exactly (dense in some order, no element shared): a sum can then be written into it (as
// PyTorch's InputBuffer does) instead of into a new tensor, which saves the allocation. A slice of a
// larger buffer (the patch tokens' part of a cat's gradient) is summed into a new dense tensor
// instead: summed in place it would stay strided, and every consumer down the chain would copy it.
bool sole_owner(const Tensor& t) {
  if (t.impl_ptr().use_count() != 1 || t.impl().storage.use_count() != 1) return false;
  if (t.offset() != 0 || t.impl().storage->nbytes() != static_cast<size_t>(t.numel()) * t.element_size()) return false;
  for (int64_t d = 0; d < t.dim(); ++d)
    if (t.stride(d) == 0 && t.size(d) > 1) return false;
  return true;
}

constinit thread_local const Node* running_node = nullptr;
constinit thread_local const std::vector<Tensor>* running_sinks = nullptr;  // gradient_sink's, per input
constinit thread_local int backward_depth = 0;  // backward() may nest (a hook calling backward)

class BackwardPass {
 public:
  BackwardPass() { ++backward_depth; }
  ~BackwardPass() { --backward_depth; }
  BackwardPass(const BackwardPass&) = delete;
  BackwardPass& operator=(const BackwardPass&) = delete;
};

// Marks `node` as the running one, with its gradient sinks, for the scope (nodes run inside hooks'
// backward calls nest).
class RunningNode {
 public:
  RunningNode(const Node* node, const std::vector<Tensor>* sinks)
      : previous_(running_node), previous_sinks_(running_sinks) {
    running_node = node;
    running_sinks = sinks;
  }
  ~RunningNode() {
    running_node = previous_;
    running_sinks = previous_sinks_;
  }
  RunningNode(const RunningNode&) = delete;
  RunningNode& operator=(const RunningNode&) = delete;

 private:
  const Node* previous_;
  const std::vector<Tensor>* previous_sinks_;
};

// The buffers `node`'s backward may add its input gradients into (gradient_sink): per input edge,
// the engine's partial sum for the edge's target when the engine alone owns it and no other edge of
// the node targets the same buffer (two gradients written into one buffer by one formula could not
// both be returned as "already added").
std::vector<Tensor> sinks_for(const Node& node, std::unordered_map<Node*, std::vector<Tensor>>& grads) {
  std::vector<Tensor> sinks;
  if (!levers().accumulate_in_place || !levers().gradient_sinks) return sinks;
  for (size_t i = 0; i < node.next.size(); ++i) {
    const Edge& edge = node.next[i];
    if (!edge) continue;
    const auto it = grads.find(edge.node.get());
    if (it == grads.end() || !it->second[edge.output].defined() || !sole_owner(it->second[edge.output])) continue;
    bool shared = false;
    for (size_t j = 0; j < node.next.size(); ++j)
      shared |= j != i && node.next[j].node == edge.node && node.next[j].output == edge.output;
    if (shared) continue;
    sinks.resize(node.next.size());
    sinks[i] = it->second[edge.output];
  }
  return sinks;
}

}  // namespace

bool in_backward() { return backward_depth > 0; }
const Node* current_backward_node() { return running_node; }

Tensor gradient_sink(size_t input) {
  return running_sinks != nullptr && input < running_sinks->size() ? (*running_sinks)[input] : Tensor();
}

void backward(const Tensor& root, const Tensor& grad_output, bool retain_graph) {
  TS_CHECK(root.requires_grad(), "backward: the tensor does not require grad and has no grad_fn (", describe(root),
           ")");
  TS_CHECK(grad_output.shape() == root.shape(), "backward: gradient of shape ", grad_output.shape(),
           " does not match the tensor's shape ", root.shape());
  BackwardPass pass;
  std::shared_ptr<Node> root_node = root.grad_fn();
  if (!root_node) {  // a leaf: its gradient is the given one
    AccumulateGrad(root.impl_ptr()).apply({grad_output});
    return;
  }
  TS_CHECK(!root_node->released(), "backward: trying to backward through the graph a second time ", "(node ",
           root_node->name(),
           "); its saved tensors were freed by the first backward. "
           "Pass retain_graph=true to the first call to backward twice.");

  NoGradGuard no_grad;
  std::unordered_map<Node*, int> deps = count_dependencies(root_node.get());
  // Gradient buffers of the nodes not yet run, one per output.
  std::unordered_map<Node*, std::vector<Tensor>> grads;
  const auto buffers_of = [&grads](Node* node) -> std::vector<Tensor>& {
    std::vector<Tensor>& buffers = grads[node];
    if (buffers.empty()) buffers.resize(node->num_outputs());
    return buffers;
  };
  buffers_of(root_node.get())[meta_of(root.impl())->output_nr] = grad_output;
  // Keeps nodes alive while they are queued even if a release() upstream drops the last edge.
  std::unordered_map<Node*, std::shared_ptr<Node>> alive;
  alive[root_node.get()] = root_node;
  std::priority_queue<Node*, std::vector<Node*>, LaterFirst> ready;
  ready.push(root_node.get());

  while (!ready.empty()) {
    Node* node = ready.top();
    ready.pop();
    TS_CHECK(!node->released(), "backward: trying to backward through the graph a second time (node ", node->name(),
             "). Pass retain_graph=true to the first call to backward twice.");
    std::vector<Tensor> input_grads;
    std::vector<bool> summed;  // per input: the formula added its gradient into the sink it was given
    if (auto it = grads.find(node); it != grads.end()) {
      std::vector<Tensor> g = std::move(it->second);
      grads.erase(it);
      std::vector<Tensor> sinks = sinks_for(*node, grads);
      RunningNode running(node, &sinks);
      input_grads = node->apply(g);
      summed.resize(sinks.size());
      for (size_t i = 0; i < sinks.size() && i < input_grads.size(); ++i)
        summed[i] = sinks[i].defined() && input_grads[i].impl_ptr() == sinks[i].impl_ptr();
    }  // else: no consumer produced a gradient; the node only passes the countdown on
    // (the sinks are dropped here, so that a buffer no formula took is again the engine's alone)
    for (size_t i = 0; i < node->next.size(); ++i) {
      const std::shared_ptr<Node>& next = node->next[i].node;
      if (!next) continue;
      if (i < input_grads.size() && input_grads[i].defined()) {
        const Tensor& gi = input_grads[i];
        TS_CHECK(gi.shape() == node->input_shapes[i], "backward: ", node->name(), " returned a gradient of shape ",
                 gi.shape(), " for input ", i, " of shape ", node->input_shapes[i], " (internal error)");
        Tensor& buf = buffers_of(next.get())[node->next[i].output];
        if (!buf.defined()) buf = gi;
        else if (i >= summed.size() || !summed[i])
          buf = accumulate(buf, gi, levers().accumulate_in_place && sole_owner(buf));
      }
      alive.try_emplace(next.get(), next);
      if (--deps[next.get()] == 0) ready.push(next.get());
    }
    if (!retain_graph) node->release();
    alive.erase(node);
  }
}

}  // namespace tessera::autograd
