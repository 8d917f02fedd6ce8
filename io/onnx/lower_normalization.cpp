// ONNX lowerings of norms, softmax and sums (io/onnx/lowerings.h).
#include "tessera/io/onnx/lowerings.h"
#include "tessera/ops/creation.h"

namespace tessera::onnx_export {

void lower_layer_norm(OnnxGraph& g, const TracedOp& op) {
  const int64_t c = op.inputs[0].shape().back();
  const std::string w = op.inputs[1].defined() ? g.input(op.inputs[1]) : g.input(ones({c}));
  const std::string b = op.inputs[2].defined() ? g.input(op.inputs[2]) : g.input(zeros({c}));
  g.output(op, g.apply("LayerNormalization", {g.input(op.inputs[0]), w, b},
                       {{"axis", int64_t{-1}}, {"epsilon", static_cast<float>(op.arg<double>("eps"))}}));
}

void lower_batch_norm(OnnxGraph& g, const TracedOp& op) {
  TS_CHECK(op.arg<int64_t>("training") == 0, "export: batch_norm in training mode (the model is in eval mode)");
  const int64_t c = op.inputs[0].size(1);
  const std::string w = op.inputs[3].defined() ? g.input(op.inputs[3]) : g.input(ones({c}));
  const std::string b = op.inputs[4].defined() ? g.input(op.inputs[4]) : g.input(zeros({c}));
  g.output(op,
           g.apply("BatchNormalization", {g.input(op.inputs[0]), w, b, g.input(op.inputs[1]), g.input(op.inputs[2])},
                   {{"epsilon", static_cast<float>(op.arg<double>("eps"))}}));
}

void lower_normalize(OnnxGraph& g, const TracedOp& op) {
  g.output(op, normalized(g, g.input(op.inputs[0]), op.arg<int64_t>("dim"), op.arg<double>("eps")));
}

void lower_softmax(OnnxGraph& g, const TracedOp& op) {
  g.output(op, g.apply("Softmax", {g.input(op.inputs[0])}, {{"axis", op.arg<int64_t>("dim")}}));
}

void lower_log_softmax(OnnxGraph& g, const TracedOp& op) {
  g.output(op, g.apply("LogSoftmax", {g.input(op.inputs[0])}, {{"axis", op.arg<int64_t>("dim")}}));
}

void lower_sum(OnnxGraph& g, const TracedOp& op) {
  const bool keep = op.arg<int64_t>("keepdim") != 0;
  const auto& dims = op.arg<std::vector<int64_t>>("dims");
  const int64_t batch = g.batch_of(op);
  int64_t moved = batch;
  for (int64_t d : dims) {
    TS_CHECK(!(g.dynamic() && d == batch), "export: a sum over the batch dim cannot be written with a dynamic batch");
    if (!keep && d < batch) --moved;
  }
  g.output(op, g.apply("ReduceSum", {g.input(op.inputs[0]), g.ints(dims)}, {{"keepdims", int64_t{keep}}}), moved);
}

}  // namespace tessera::onnx_export
