// ONNX lowerings of views and copies (io/onnx/lowerings.h). Each follows where the batch dim goes,
// so that a dynamic batch stays symbolic.
#include "tessera/io/onnx/lowerings.h"
#include "tessera/ops/creation.h"

namespace tessera::onnx_export {

void lower_clone(OnnxGraph& g, const TracedOp& op) { g.output(op, g.apply("Identity", {g.input(op.inputs[0])})); }

// The graph is float32 throughout: a cast between floating dtypes (autocast) is the identity.
void lower_to(OnnxGraph& g, const TracedOp& op) {
  TS_CHECK(op.outputs[0].dtype() == op.inputs[0].dtype() || is_floating(op.outputs[0].dtype()), "export: a cast to ",
           dtype_name(op.outputs[0].dtype()), " cannot be written");
  g.output(op, g.apply("Identity", {g.input(op.inputs[0])}));
}

void lower_reshape(OnnxGraph& g, const TracedOp& op) {
  const Shape& in = op.inputs[0].shape();
  const Shape& out = op.outputs[0].shape();
  const int64_t batch = g.batch_of(op);
  int64_t moved = -1;
  if (batch >= 0) {  // where the batch dim lands: the dim whose leading elements match
    int64_t before = 1;
    for (int64_t d = 0; d < batch; ++d) before *= in[static_cast<size_t>(d)];
    int64_t acc = 1;
    for (size_t j = 0; j < out.size(); ++j) {
      if (acc == before && out[j] == in[static_cast<size_t>(batch)]) {
        moved = static_cast<int64_t>(j);
        break;
      }
      acc *= out[j];
    }
    TS_CHECK(moved >= 0 || !g.dynamic(), "export: a reshape of ", in, " to ", out,
             " merges the batch dim with another, which a dynamic batch cannot follow");
  }
  g.output(op, g.apply("Reshape", {g.input(op.inputs[0]), g.reshape_target(out, moved)}), moved);
}

void lower_permute(OnnxGraph& g, const TracedOp& op) {
  const auto& dims = op.arg<std::vector<int64_t>>("dims");
  const int64_t batch = g.batch_of(op);
  int64_t moved = -1;
  for (size_t i = 0; i < dims.size(); ++i)
    if (dims[i] == batch) moved = static_cast<int64_t>(i);
  g.output(op, g.apply("Transpose", {g.input(op.inputs[0])}, {{"perm", dims}}), moved);
}

void lower_slice(OnnxGraph& g, const TracedOp& op) {
  const int64_t d = op.arg<int64_t>("dim");
  TS_CHECK(!(g.dynamic() && d == g.batch_of(op)),
           "export: a slice of the batch dim cannot be written with a dynamic batch");
  g.output(op, g.apply("Slice", {g.input(op.inputs[0]), g.ints({op.arg<int64_t>("start")}),
                                 g.ints({op.arg<int64_t>("end")}), g.ints({d}), g.ints({op.arg<int64_t>("step")})}));
}

void lower_select(OnnxGraph& g, const TracedOp& op) {
  const int64_t d = op.arg<int64_t>("dim"), batch = g.batch_of(op);
  TS_CHECK(!(g.dynamic() && d == batch), "export: a select from the batch dim cannot be written with a dynamic batch");
  const std::string index = g.constant(from_vector(std::vector<int64_t>{op.arg<int64_t>("index")}, {}));
  g.output(op, g.apply("Gather", {g.input(op.inputs[0]), index}, {{"axis", d}}), batch > d ? batch - 1 : batch);
}

void lower_expand(OnnxGraph& g, const TracedOp& op) {
  const Shape& out = op.outputs[0].shape();
  const int64_t lead = op.outputs[0].dim() - op.inputs[0].dim(), batch = g.batch_of(op);
  const int64_t moved = batch >= 0 ? batch + lead : -1;
  std::vector<int64_t> target(out.begin(), out.end());
  if (g.dynamic() && moved >= 0) target[static_cast<size_t>(moved)] = 1;  // Expand broadcasts: 1 keeps the batch
  g.output(op, g.apply("Expand", {g.input(op.inputs[0]), g.ints(target)}), moved);
}

}  // namespace tessera::onnx_export
