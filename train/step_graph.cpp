// A training step as a CUDA Graph; see train/step_graph.h.
#include "tessera/train/step_graph.h"

#include "tessera/autograd/grad_mode.h"
#include "tessera/core/error.h"
#include "tessera/ops/creation.h"

namespace tessera::train {

StepGraph::StepGraph(Device device, Body body, int warmup, std::function<void(const std::string&)> log)
    : device_(device), body_(std::move(body)), warmup_left_(warmup), log_(std::move(log)) {
  TS_CHECK(!device.is_cpu(), "--cuda-graph: CUDA Graphs need a cuda device; the step runs on ", device.str());
  TS_CHECK(warmup >= 0, "StepGraph: warm-up steps must be >= 0, got ", warmup);
}

StepGraph::~StepGraph() = default;

bool StepGraph::matches_static(const std::vector<Tensor>& inputs) const {
  if (inputs.size() != static_inputs_.size()) return false;
  for (size_t i = 0; i < inputs.size(); ++i)
    if (inputs[i].shape() != static_inputs_[i].shape() || inputs[i].dtype() != static_inputs_[i].dtype()) return false;
  return true;
}

std::vector<Tensor> StepGraph::run(const std::vector<Tensor>& inputs) {
  if (static_inputs_.empty())
    for (const Tensor& t : inputs) static_inputs_.push_back(Tensor::empty(t.shape(), t.dtype(), device_));
  if (!matches_static(inputs)) {
    // The graph holds the first inputs' shapes; another shape (a last, smaller batch) runs eagerly.
    if (!warned_shapes_ && log_)
      log_("--cuda-graph: a step with inputs of other shapes than the captured ones runs eagerly");
    warned_shapes_ = true;
    std::vector<Tensor> on_device;
    for (const Tensor& t : inputs) on_device.push_back(t.to(device_));
    return body_(on_device);
  }
  {
    NoGradGuard no_grad;
    for (size_t i = 0; i < inputs.size(); ++i) static_inputs_[i].copy_(inputs[i].to(device_));
  }
  if (graph_) {
    graph_->replay();
    return static_outputs_;
  }
  if (warmup_left_ > 0 || !fallback_.empty()) {
    warmup_left_ = std::max(0, warmup_left_ - 1);
    return body_(static_inputs_);
  }
  try {
    graph_ = capture_graph(device_, [&] { static_outputs_ = body_(static_inputs_); });
  } catch (const CaptureError& e) {
    // Nothing recorded has run: the step is run eagerly now, and every step after it.
    fallback_ = e.what();
    static_outputs_.clear();
    if (log_) log_(std::string("--cuda-graph: the training step cannot be captured, so it runs eagerly: ") + fallback_);
    return body_(static_inputs_);
  }
  if (log_)
    log_(detail::concat("--cuda-graph: training step captured (", graph_->nodes(),
                        " kernels, copies and library calls); each step is now one graph launch"));
  graph_->replay();  // capturing ran nothing: this step is the first replay
  return static_outputs_;
}

}  // namespace tessera::train
