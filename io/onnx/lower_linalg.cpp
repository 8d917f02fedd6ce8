// ONNX lowerings of products and convolutions (io/onnx/lowerings.h).
#include "tessera/io/onnx/lowerings.h"

namespace tessera::onnx_export {

void lower_matmul(OnnxGraph& g, const TracedOp& op) {
  g.output(op, g.apply("MatMul", {g.input(op.inputs[0]), g.input(op.inputs[1])}));
}

void lower_linear(OnnxGraph& g, const TracedOp& op) { g.output(op, linear(g, op)); }

void lower_conv2d(OnnxGraph& g, const TracedOp& op) {
  std::vector<std::string> in{g.input(op.inputs[0]), g.input(op.inputs[1])};
  if (op.inputs[2].defined()) in.push_back(g.input(op.inputs[2]));
  const auto& pad = op.arg<std::vector<int64_t>>("padding");
  g.output(op, g.apply("Conv", in,
                       {{"strides", op.arg<std::vector<int64_t>>("stride")},
                        {"pads", std::vector<int64_t>{pad[0], pad[1], pad[0], pad[1]}},
                        {"dilations", op.arg<std::vector<int64_t>>("dilation")},
                        {"group", op.arg<int64_t>("groups")},
                        {"kernel_shape", std::vector<int64_t>{op.inputs[1].size(2), op.inputs[1].size(3)}}}));
}

}  // namespace tessera::onnx_export
