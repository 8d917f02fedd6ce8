// The lowering table (io/onnx/lowerings.h), from the op list, and the compositions lowerings share.
#include "tessera/io/onnx/lowerings.h"

#include <cmath>

namespace tessera::onnx_export {

#define TS_LOWERING_ENTRY_Lowered(name) &lower_##name,
#define TS_LOWERING_ENTRY_Refused(name) nullptr,
#define TS_LOWERING_ENTRY_Untraced(name) nullptr,
#define TS_LOWERING_ENTRY(name, family, trace) TS_LOWERING_ENTRY_##trace(name)

Lowering lowering_of(OpId op) {
  static constexpr Lowering table[] = {TESSERA_OPS(TS_LOWERING_ENTRY)};
  static_assert(std::size(table) == kOpCount);
  return table[static_cast<size_t>(op)];
}

std::string normalized(OnnxGraph& g, const std::string& x, int64_t axis, double eps) {
  const std::string norm = g.apply("ReduceL2", {x}, {{"axes", std::vector<int64_t>{axis}}, {"keepdims", int64_t{1}}});
  return g.apply("Div", {x, g.apply("Max", {norm, g.scalar(eps)})});
}

std::string gelu(OnnxGraph& g, const std::string& x, bool tanh_form) {
  if (tanh_form) {  // 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³)))
    const std::string cube = g.apply("Mul", {x, g.apply("Mul", {x, x})});
    const std::string inner = g.apply(
        "Mul", {g.apply("Add", {x, g.apply("Mul", {cube, g.scalar(0.044715)})}), g.scalar(std::sqrt(2.0 / M_PI))});
    return g.apply("Mul",
                   {g.apply("Mul", {x, g.scalar(0.5)}), g.apply("Add", {g.apply("Tanh", {inner}), g.scalar(1.0)})});
  }
  // 0.5·x·(1 + erf(x/√2))
  const std::string e = g.apply("Erf", {g.apply("Div", {x, g.scalar(std::sqrt(2.0))})});
  return g.apply("Mul", {g.apply("Mul", {x, g.scalar(0.5)}), g.apply("Add", {e, g.scalar(1.0)})});
}

std::string linear(OnnxGraph& g, const TracedOp& op) {
  const std::string wt = g.apply("Transpose", {g.input(op.inputs[1])}, {{"perm", std::vector<int64_t>{1, 0}}});
  std::string y = g.apply("MatMul", {g.input(op.inputs[0]), wt});
  if (op.inputs[2].defined()) y = g.apply("Add", {y, g.input(op.inputs[2])});
  return y;
}

std::string conv(OnnxGraph& g, const TracedOp& op) {
  std::vector<std::string> in{g.input(op.inputs[0]), g.input(op.inputs[1])};
  if (op.inputs[2].defined()) in.push_back(g.input(op.inputs[2]));
  const auto& pad = op.arg<std::vector<int64_t>>("padding");
  return g.apply("Conv", in,
                 {{"strides", op.arg<std::vector<int64_t>>("stride")},
                  {"pads", std::vector<int64_t>{pad[0], pad[1], pad[0], pad[1]}},
                  {"dilations", op.arg<std::vector<int64_t>>("dilation")},
                  {"group", op.arg<int64_t>("groups")},
                  {"kernel_shape", std::vector<int64_t>{op.inputs[1].size(2), op.inputs[1].size(3)}}});
}

std::string last_two_swapped(OnnxGraph& g, const std::string& x, int64_t rank) {
  std::vector<int64_t> perm(static_cast<size_t>(rank));
  for (int64_t i = 0; i < rank; ++i) perm[static_cast<size_t>(i)] = i;
  std::swap(perm[static_cast<size_t>(rank - 1)], perm[static_cast<size_t>(rank - 2)]);
  return g.apply("Transpose", {x}, {{"perm", perm}});
}

}  // namespace tessera::onnx_export
