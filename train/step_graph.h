// --cuda-graph: a training step recorded once as a CUDA Graph and replayed (core/graph.h).
//
// A step of a vision transformer queues a few thousand kernels; on a GPU each launch costs the host
// microseconds, so at small batch sizes the host, not the GPU, sets the pace. StepGraph runs a step
// function eagerly for the first `warmup` calls (the library algorithm caches, the optimizer state
// and the allocator fill up), then records the next call into a graph and from then on replays it:
// one launch per step.
//
// A graph reads and writes the addresses it was captured with, so the step's inputs are copied
// into static tensors before every call (the body always sees the same tensors), and its outputs
// are the same tensors at every replay (each replay rewrites them: copy what must outlive the next
// call). Per-step values (learning rate, update count) must be read from device memory the caller
// rewrites before each call (train::Optimizer::set_capturable); random draws on the device (dropout,
// drop path) are new at each replay (Generator, ops/creation.h).
//
// Where the step cannot be captured (it reads a value on the host or draws random numbers there,
// or its inputs change shape), StepGraph says why once and runs eagerly:
// nothing the failed capture recorded has run, so no step is lost or done twice.
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "tessera/core/graph.h"
#include "tessera/core/tensor.h"

namespace tessera::train {

class StepGraph {
 public:
  // One step on `inputs` (device tensors: the static ones), returning its outputs (device tensors).
  using Body = std::function<std::vector<Tensor>(const std::vector<Tensor>& inputs)>;
  // `log` receives the one-line reports: captured (with the graph's size), or why not.
  StepGraph(Device device, Body body, int warmup, std::function<void(const std::string&)> log);
  ~StepGraph();

  // Copies `inputs` (on the host or the device) into the static inputs and runs the step: eagerly
  // during warm-up or after a fallback, else by replaying the graph (captured on the first call
  // after warm-up). Inputs of other shapes or dtypes than the first call's run eagerly.
  std::vector<Tensor> run(const std::vector<Tensor>& inputs);

  bool captured() const { return graph_ != nullptr; }
  // Why the step runs eagerly for good ("" while it may still be, or has been, captured).
  const std::string& fallback_reason() const { return fallback_; }
  int64_t graph_nodes() const { return graph_ ? graph_->nodes() : 0; }

 private:
  bool matches_static(const std::vector<Tensor>& inputs) const;

  Device device_;
  Body body_;
  int warmup_left_;
  std::function<void(const std::string&)> log_;
  std::vector<Tensor> static_inputs_;
  std::vector<Tensor> static_outputs_;
  std::unique_ptr<DeviceGraph> graph_;
  std::string fallback_;
  bool warned_shapes_ = false;
};

}  // namespace tessera::train
