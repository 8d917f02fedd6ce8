// ONNX lowerings of products and convolutions (io/onnx/lowerings.h).
#include "tessera/io/onnx/lowerings.h"

namespace tessera::onnx_export {

void lower_matmul(OnnxGraph& g, const TracedOp& op) {
  g.output(op, g.apply("MatMul", {g.input(op.inputs[0]), g.input(op.inputs[1])}));
}

void lower_linear(OnnxGraph& g, const TracedOp& op) { g.output(op, linear(g, op)); }

void lower_conv2d(OnnxGraph& g, const TracedOp& op) { g.output(op, conv(g, op)); }

}  // namespace tessera::onnx_export
