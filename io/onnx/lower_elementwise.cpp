// ONNX lowerings of the elementwise ops (io/onnx/lowerings.h): each is one ONNX op or a short
// composition of them.
#include "tessera/io/onnx/lowerings.h"

namespace tessera::onnx_export {

namespace {
void one_to_one(OnnxGraph& g, const TracedOp& op, const char* onnx_op) {
  std::vector<std::string> in;
  for (const Tensor& t : op.inputs) in.push_back(g.input(t));
  g.output(op, g.apply(onnx_op, in));
}
}  // namespace

#define TS_ONE_TO_ONE(name, onnx_op) \
  void lower_##name(OnnxGraph& g, const TracedOp& op) { one_to_one(g, op, onnx_op); }
TS_ONE_TO_ONE(add, "Add")
TS_ONE_TO_ONE(sub, "Sub")
TS_ONE_TO_ONE(mul, "Mul")
TS_ONE_TO_ONE(div, "Div")
TS_ONE_TO_ONE(pow, "Pow")
TS_ONE_TO_ONE(maximum, "Max")
TS_ONE_TO_ONE(minimum, "Min")
TS_ONE_TO_ONE(neg, "Neg")
TS_ONE_TO_ONE(exp, "Exp")
TS_ONE_TO_ONE(log, "Log")
TS_ONE_TO_ONE(sqrt, "Sqrt")
TS_ONE_TO_ONE(abs, "Abs")
TS_ONE_TO_ONE(tanh, "Tanh")
TS_ONE_TO_ONE(erf, "Erf")
TS_ONE_TO_ONE(sin, "Sin")
TS_ONE_TO_ONE(cos, "Cos")
TS_ONE_TO_ONE(sigmoid, "Sigmoid")
TS_ONE_TO_ONE(relu, "Relu")
TS_ONE_TO_ONE(where, "Where")
#undef TS_ONE_TO_ONE

void lower_rsqrt(OnnxGraph& g, const TracedOp& op) {
  g.output(op, g.apply("Reciprocal", {g.apply("Sqrt", {g.input(op.inputs[0])})}));
}

void lower_silu(OnnxGraph& g, const TracedOp& op) {
  const std::string x = g.input(op.inputs[0]);
  g.output(op, g.apply("Mul", {x, g.apply("Sigmoid", {x})}));
}

void lower_gelu(OnnxGraph& g, const TracedOp& op) {
  g.output(op, gelu(g, g.input(op.inputs[0]), op.arg<int64_t>("tanh") != 0));
}

void lower_clamp(OnnxGraph& g, const TracedOp& op) {
  g.output(op, g.apply("Clip", {g.input(op.inputs[0]), g.scalar(op.arg<double>("a")), g.scalar(op.arg<double>("b"))}));
}

}  // namespace tessera::onnx_export
